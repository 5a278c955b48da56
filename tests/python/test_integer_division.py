"""`//`, `%`, fmod and div's rounding modes of integer tensors on the chip
(torch_bridge/csrc/aten/integer_division.cc): int32, int8 and uint8 at every value of their range,
int64 of known magnitude below 2^31, by constants and by tensors, against the CPU's results."""
import pytest
import torch

import vtpu

INT32_EDGES = [-(2**31), 2**31 - 1, -(2**31) + 1, 0, 1, -1, 2**24, 2**24 + 1, -(2**24) - 3, 2**30, 123456789, -987654321]

OPS = {
    "floor_divide": lambda a, b: a // b,
    "remainder": lambda a, b: a % b,
    "fmod": torch.fmod,
    "div_trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "div_floor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
}


def int32_values(count, seed):
    """Every magnitude from 1 bit to 31, both signs, and the range's edges."""
    g = torch.Generator().manual_seed(seed)
    bits = torch.randint(1, 32, (count,), generator=g)
    magnitude = (torch.rand(count, generator=g, dtype=torch.float64) * (2.0**bits)).floor().to(torch.int64)
    signs = torch.randint(0, 2, (count,), generator=g) * 2 - 1
    return torch.cat([torch.tensor(INT32_EDGES), (magnitude * signs).clamp(-(2**31), 2**31 - 1)]).to(torch.int32)


@pytest.mark.parametrize("mode", ["strict_eager", "defer_and_fuse"])
@pytest.mark.parametrize("name", sorted(OPS))
def test_int32_by_a_tensor_over_the_whole_range(mode, name, no_fallback):
    vtpu.set_mode(mode)
    a = int32_values(500, 1)
    b = int32_values(500, 2).flip(0)
    b = torch.where(b == 0, 7, b)
    b = torch.where((a == -(2**31)) & (b == -1), 3, b)  # the CPU's x86 division traps (SIGFPE) there
    want = OPS[name](a, b)
    got = OPS[name](a.to("tpu"), b.to("tpu")).cpu()
    assert got.dtype == want.dtype and torch.equal(got, want)
    assert vtpu.stats()["cpu_fallback_ops"] == 0


@pytest.mark.parametrize("divisor", [1, -1, 3, -7, 2**20, 2**24 + 1, -(2**31), 2**31 - 1])
@pytest.mark.parametrize("name", sorted(OPS))
def test_int32_by_a_constant_and_a_constant_by_a_tensor(name, divisor, no_fallback):
    a = int32_values(300, 3)
    a = a[a != -(2**31)] if divisor == -1 else a  # the CPU's x86 division traps (SIGFPE) there
    assert torch.equal(OPS[name](a.to("tpu"), divisor).cpu(), OPS[name](a, divisor))
    if name in ("floor_divide", "remainder"):  # Python's reflected operators: the number first
        nonzero = torch.where((a == 0) | ((a == -1) & (divisor == -(2**31))), 5, a)
        assert torch.equal(OPS[name](divisor, nonzero.to("tpu")).cpu(), OPS[name](divisor, nonzero))
    assert vtpu.stats()["cpu_fallback_ops"] == 0


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8])
@pytest.mark.parametrize("name", sorted(OPS))
def test_small_integer_types_at_every_pair(dtype, name, no_fallback):
    info = torch.iinfo(dtype)
    values = torch.arange(info.min, info.max + 1, dtype=torch.int32)
    a, b = torch.meshgrid(values, values[values != 0], indexing="ij")
    a, b = a.to(dtype), b.to(dtype)
    want = OPS[name](a, b)
    got = OPS[name](a.to("tpu"), b.to("tpu")).cpu()
    assert got.dtype == want.dtype and torch.equal(got, want)
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def test_int64_of_int32_magnitude_and_in_place_forms(no_fallback):
    a = int32_values(300, 4).long().clamp(min=-(2**31) + 1)  # magnitudes below 2^31
    b = torch.where(a == 0, 3, a).flip(0)
    ta, tb = a.to("tpu"), b.to("tpu")
    assert torch.equal((ta == 2**31 - 1).cpu(), a == 2**31 - 1)  # the int32 extremes narrow too
    assert torch.equal((ta // tb).cpu(), a // b)
    assert torch.equal((ta % 1_000_003).cpu(), a % 1_000_003)
    assert torch.equal(torch.fmod(ta, tb).cpu(), torch.fmod(a, b))
    t = a.int().to("tpu")
    t //= 10
    t %= 7
    assert torch.equal(t.cpu(), (a.int() // 10) % 7)
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def test_division_by_zero_and_what_stays_on_the_cpu(no_fallback):
    a = torch.tensor([5, -3, 7], dtype=torch.int32, device="tpu")
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        a // 0
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        a % torch.tensor([1, 0, 2], dtype=torch.int32, device="tpu")
    with pytest.raises(NotImplementedError, match="floor_divide.*int32, int8 or uint8"):
        torch.tensor([2**40]).to("tpu") // 3  # int64 past int32's range
    with pytest.raises(NotImplementedError, match="remainder.*known magnitude below 2\\^31"):
        torch.tensor([5], dtype=torch.int16).to("tpu") % 3
