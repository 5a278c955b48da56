"""Integer powers on the chip, exact as the CPU's (kernels/compose/integer_power.h,
torch_bridge/csrc/aten/integer_power.cc). The f32 pow they ran through before gave (-7)**2 = 48
and 3**19 off by 933 in int32."""
import pytest
import torch

import vtpu

BASES = [0, 1, -1, 2, -2, 3, -7, 10, 46341, -(2**31), 2**31 - 1, 123456789]


@pytest.mark.parametrize("mode", ["strict_eager", "defer_and_fuse"])
def test_int32_by_tensors_and_constants(mode, no_fallback):
    vtpu.set_mode(mode)
    a, b = torch.meshgrid(torch.tensor(BASES, dtype=torch.int32), torch.arange(-4, 40, dtype=torch.int32), indexing="ij")
    assert torch.equal((a.to("tpu") ** b.to("tpu")).cpu(), a**b)
    bases = torch.tensor(BASES, dtype=torch.int32)
    for exponent in (0, 1, 2, 3, 19, 31, 64):
        assert torch.equal((bases.to("tpu") ** exponent).cpu(), bases**exponent), exponent
    assert torch.equal(torch.square(bases.to("tpu")).cpu(), torch.square(bases))
    exponents = torch.arange(0, 12, dtype=torch.int32)
    assert torch.equal((3 ** exponents.to("tpu")).cpu(), 3**exponents)  # a number to a tensor's powers
    assert vtpu.stats()["cpu_fallback_ops"] == 0


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8])
def test_bytes_at_every_pair(dtype, no_fallback):
    info = torch.iinfo(dtype)
    values = torch.arange(info.min, info.max + 1, dtype=torch.int32)
    a, b = torch.meshgrid(values.to(dtype), values.to(dtype), indexing="ij")
    assert torch.equal((a.to("tpu") ** b.to("tpu")).cpu(), a**b)
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def test_int64_of_known_magnitude_and_what_stays_on_the_cpu(no_fallback):
    x = torch.tensor([3, -2, 5, 0, 1, -1, 40])
    assert torch.equal((x.to("tpu") ** 5).cpu(), x**5)
    e = torch.tensor([0, 3, 2, 5, 4, 5, 1])  # 40^5 at most: below 2^31
    assert torch.equal((x.to("tpu") ** e.to("tpu")).cpu(), x**e)
    assert torch.equal(torch.square(x.to("tpu")).cpu(), torch.square(x))
    assert vtpu.stats()["cpu_fallback_ops"] == 0
    with pytest.raises(RuntimeError, match="Integers to negative integer powers are not allowed"):
        x.to("tpu") ** -1
    with pytest.raises(NotImplementedError, match="pow.*int64 whose result is known below 2\\^31"):
        x.to("tpu") ** 9  # 40^9: past 2^31
