"""uint8 tensors on the chip (loaded zero-extended by vld.u8, computed in int32 vregs) and the
wrapping of uint8 and int8 arithmetic, also for what reads a wrapped value inside the same fused
kernel: torch's 200 + 100 is 44 in uint8, and (a + b) < 50 sees the 44."""
import pytest
import torch

import vtpu


@pytest.fixture(autouse=True)
def chip(no_fallback):
    yield


OPS = {
    "eq": lambda x, y: x == y,
    "add": lambda x, y: x + y,
    "add_then_compare": lambda x, y: (x + y) < 50,
    "mul_then_compare": lambda x, y: (x * y) > 20,
    "sub": lambda x, y: x - y,
    "not_then_compare": lambda x, y: (~x) == torch.tensor(-2).to(x.dtype).item(),
    "to_float_and_back": lambda x, y: (x.float() * 1.5).to(x.dtype),
    "maximum": lambda x, y: torch.maximum(x, y),
    "where": lambda x, y: torch.where(x > y, x, y),
    "widened": lambda x, y: (x + y).to(torch.int32),
}


@pytest.mark.parametrize("mode", ["strict_eager", "defer_and_fuse"])
@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8])
@pytest.mark.parametrize("op", sorted(OPS))
def test_byte_arithmetic_wraps_as_torch_does(mode, dtype, op):
    vtpu.set_mode(mode)
    g = torch.Generator().manual_seed(3)
    low, high = (0, 256) if dtype == torch.uint8 else (-128, 128)
    a, b = (torch.randint(low, high, (4, 50), generator=g).to(dtype) for _ in range(2))
    assert torch.equal(OPS[op](a.to("tpu"), b.to("tpu")).cpu(), OPS[op](a, b))
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def test_uint8_sums_and_the_generator_state_compare_on_the_chip():
    x = torch.randint(0, 256, (3, 1000), dtype=torch.uint8, generator=torch.Generator().manual_seed(4))
    assert torch.equal(x.to("tpu").sum(1).cpu(), x.sum(1))
    state = torch.tpu.get_rng_state()  # DTensor's RNG tracker compares ranks' states this way
    assert bool((state.to("tpu") == state.to("tpu")).all())
    assert vtpu.stats()["cpu_fallback_ops"] == 0
