"""nextafter and frexp on the chip from each float's bit pattern (vtpu/float_bits.py), bit for
bit against the CPU in float32, bfloat16 and float16: every pair of zeros (both signs),
denormals, the largest finite value, infinities, NaN and ordinary values; frexp's out= form, a
CPU 0-d operand, and frexp's gradient; in both eager modes with no CPU op. float64 runs on the
CPU, named, never through f32."""
import math

import pytest
import torch
from cpu_comparison import assert_matches_cpu


VALUES = [0.0, -0.0, 1.0, -1.0, 1e-40, -1e-40, 1.4e-45, 3.4028235e38, math.inf, -math.inf, math.nan, 2.0, 0.5,
          1e-38, 1.1754944e-38, 123.456, -7e-5, 65504.0, 6e-8]
BITS = {torch.float32: torch.int32, torch.bfloat16: torch.int16, torch.float16: torch.int16}


def same_bits(got, want):
    """Equal bit patterns, any NaN equal to any NaN (payloads are not compared)."""
    assert torch.equal(got.isnan(), want.isnan())
    keep = ~want.isnan()
    assert torch.equal(got[keep].view(BITS[got.dtype]), want[keep].view(BITS[want.dtype]))


@pytest.mark.usefixtures("native_in_each_eager_mode")
@pytest.mark.parametrize("dtype", list(BITS), ids=str)
def test_nextafter_steps_one_pattern_toward_the_other(dtype):
    x = torch.tensor(VALUES).to(dtype)
    a, b = x.reshape(-1, 1).expand(-1, len(VALUES)), x.reshape(1, -1).expand(len(VALUES), -1)
    same_bits(torch.nextafter(a.to("tpu"), b.to("tpu")).cpu(), torch.nextafter(a, b))
    same_bits(torch.nextafter(x.to("tpu"), torch.tensor(1.0, dtype=dtype)).cpu(), torch.nextafter(x, torch.tensor(1.0, dtype=dtype)))


@pytest.mark.usefixtures("native_in_each_eager_mode")
@pytest.mark.parametrize("dtype", list(BITS), ids=str)
def test_frexp_mantissa_and_exponent(dtype):
    x = torch.cat([torch.tensor(VALUES), torch.randn(200, generator=torch.Generator().manual_seed(0)) * 1e3]).to(dtype)
    mantissa, exponent = torch.frexp(x.to("tpu"))
    want_mantissa, want_exponent = torch.frexp(x)
    same_bits(mantissa.cpu(), want_mantissa)
    assert exponent.dtype == torch.int32 and torch.equal(exponent.cpu(), want_exponent)
    out = (torch.empty(0, dtype=dtype, device="tpu"), torch.empty(0, dtype=torch.int32, device="tpu"))
    torch.frexp(x.to("tpu"), out=out)
    same_bits(out[0].cpu(), want_mantissa)
    assert torch.equal(out[1].cpu(), want_exponent)


@pytest.mark.usefixtures("native_in_each_eager_mode")
def test_frexp_gradient():
    assert_matches_cpu(lambda t: torch.frexp(t).mantissa, torch.randn(30, generator=torch.Generator().manual_seed(1)) * 50)


FLOAT64_CASES = [lambda t: torch.frexp(t).mantissa, lambda t: torch.nextafter(t, torch.full_like(t, 1.0)),
                 lambda t: torch.nextafter(t.float(), t)]
FLOAT64_IDS = ["frexp", "nextafter", "nextafter promoted"]


@pytest.mark.parametrize("fn", FLOAT64_CASES, ids=FLOAT64_IDS)
def test_float64_is_named_without_the_fallback(fn, no_fallback):
    x = torch.tensor([0.3, 1.0 + 1e-12, -2.5e-300], dtype=torch.float64)
    with pytest.raises(NotImplementedError, match="cannot run on the chip: float64 inputs"):
        fn(x.to("tpu"))


@pytest.mark.usefixtures("cpu_fallback")
@pytest.mark.parametrize("fn", FLOAT64_CASES, ids=FLOAT64_IDS)
def test_float64_runs_on_the_cpu_never_through_f32(fn):
    x = torch.tensor([0.3, 1.0 + 1e-12, -2.5e-300], dtype=torch.float64)
    assert torch.equal(fn(x.to("tpu")).cpu(), fn(x))  # the CPU's float64 values exactly
