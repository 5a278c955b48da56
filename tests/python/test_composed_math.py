"""Elementwise math composed from the vector unit's instructions (torch_bridge/csrc/aten/
composed_math.cc) against torch's CPU results: values over wide ranges, signed zeros, halves,
the f32 integer limits, infinities and NaN, in every form (functional, in-place, out=), with no
CPU op at all."""
import pytest
import torch

import vtpu

SPECIAL = torch.tensor([0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 1e-7, -1e-7, 1e-30, 4194303.5, 8388607.5, 1e10, -1e10,
                        float("inf"), float("-inf"), float("nan")])
WIDE = torch.cat([torch.linspace(-30, 30, 2001), SPECIAL, torch.randn(500) * 1e-3])
UNIT = torch.cat([torch.linspace(-1, 1, 2001), torch.tensor([1e-7, -1e-7, 0.9999999, float("nan")])])

# op: (inputs, relative tolerance); rounding and sign ops must be exact.
UNARY = {
    "trunc": (WIDE, 0), "floor": (WIDE, 0), "ceil": (WIDE, 0), "round": (WIDE, 0), "frac": (WIDE, 0), "sign": (WIDE, 0),
    "expm1": (WIDE, 1e-6), "log1p": (torch.cat([WIDE.abs() - 0.99, torch.tensor([-1.0, -1.5])]), 1e-6),
    "exp2": (WIDE, 2e-6), "log2": (WIDE.abs(), 1e-6), "log10": (WIDE.abs(), 1e-6),
    "tan": (torch.linspace(-1.5, 1.5, 999), 1e-6), "atan": (WIDE, 1e-6), "asin": (UNIT, 1e-6), "acos": (UNIT, 1e-5),
    "sinh": (torch.linspace(-10, 10, 999), 1e-6), "cosh": (torch.linspace(-10, 10, 999), 1e-6), "asinh": (WIDE, 1e-6),
    "acosh": (WIDE.abs() + 1, 1e-6), "atanh": (UNIT * 0.999, 1e-5), "erfc": (WIDE, 1e-5),
    "deg2rad": (WIDE, 0), "rad2deg": (WIDE, 0),
    # poles (0, negative integers) included; near them the exact argument reduction keeps precision
    # (lgamma: absolute 2e-6 near its zeros at 1 and 2, where a relative bound means nothing)
    "lgamma": (torch.cat([torch.linspace(-5, 10, 301), torch.tensor([0.0, -1.0, -2.5, 1.0, 2.0, 1e-6, 100.0])]), 1e-5, 2e-6),
    "digamma": (torch.cat([torch.linspace(-5, 10, 301), torch.tensor([0.0, -0.0, -1.0, -2.5, 1e-6, 100.0])]), 1e-5),
}


pytestmark = pytest.mark.usefixtures("native_in_each_eager_mode")


def assert_matches(got, want, rtol, atol=1e-30):
    got = got.cpu()
    assert torch.equal(torch.isnan(got), torch.isnan(want))
    finite = torch.isfinite(want)
    assert torch.equal(got[~finite & ~torch.isnan(want)], want[~finite & ~torch.isnan(want)])  # infinities exactly
    torch.testing.assert_close(got[finite], want[finite], rtol=rtol, atol=atol if rtol else 0)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_matches_the_cpu(name):
    inputs, rtol, *atol = UNARY[name]
    fn = getattr(torch, name)
    assert_matches(fn(inputs.to("tpu")), fn(inputs), rtol, *atol)


@pytest.mark.parametrize("name", ["floor", "log1p", "atan"])
def test_inplace_and_out_forms(name):
    inputs, rtol = UNARY[name]
    want = getattr(torch, name)(inputs)
    x = inputs.to("tpu")
    getattr(x, name + "_")()
    assert_matches(x, want, rtol)
    out = torch.empty(3, device="tpu")
    getattr(torch, name)(inputs.to("tpu"), out=out)
    assert out.shape == inputs.shape
    assert_matches(out, want, rtol)


def test_rounding_keeps_integer_dtypes_and_sign_of_integers():
    ints = torch.tensor([3, -3, 0, 7], dtype=torch.int32)
    for name in ("floor", "ceil", "trunc", "round", "sign"):
        got = getattr(torch, name)(ints.to("tpu"))
        assert got.dtype == torch.int32 and torch.equal(got.cpu(), getattr(torch, name)(ints))
    assert torch.equal(torch.round(torch.tensor([0.5, 1.5, 2.5, -0.5, -1.5]).to("tpu")).cpu(),
                       torch.tensor([0.0, 2.0, 2.0, -0.0, -2.0]))  # half to even


@pytest.mark.parametrize("name", ["atan2", "fmax", "fmin", "logaddexp", "hypot"])
def test_binary_matches_the_cpu(name):
    torch.manual_seed(0)
    a, b = torch.randn(500) * 3, torch.randn(500) * 3
    a[:6] = torch.tensor([0.0, 0.0, -1.0, float("nan"), 1.0, float("inf")])
    b[:6] = torch.tensor([0.0, -1.0, 0.0, 1.0, float("nan"), float("inf")])
    fn = getattr(torch, name)
    assert_matches(fn(a.to("tpu"), b.to("tpu")), fn(a, b), 1e-6, atol=1e-7)  # absolute where results cancel to ~0
    assert_matches(fn(a.to("tpu"), torch.tensor(2.0)), fn(a, torch.tensor(2.0)), 1e-6, atol=1e-7)  # a CPU scalar operand


def test_bf16_inputs_round_like_the_cpu():
    x = torch.linspace(-4, 4, 257).to(torch.bfloat16)
    for name in ("floor", "expm1", "atan", "erfc"):
        got = getattr(torch, name)(x.to("tpu"))
        assert got.dtype == torch.bfloat16
        torch.testing.assert_close(got.cpu(), getattr(torch, name)(x), atol=0, rtol=8e-3)


@pytest.mark.parametrize("fn", [torch.sin, torch.cos, torch.tan], ids=lambda f: f.__name__)
def test_trigonometry_at_any_magnitude(fn):
    # past |x| = 2^23 the quadrant comes from an exact (Payne-Hanek) reduction: sin(1e9) was 13.29,
    # and past 2^31 -inf or NaN, before it
    g = torch.Generator().manual_seed(3)
    x = (torch.rand(4000, generator=g) + 0.5) * torch.pow(2.0, torch.randint(0, 128, (4000,), generator=g).float())
    x = torch.cat([x, -x, torch.tensor([8388608.0, 1e9, 3.4e38, float("inf"), float("nan")])])
    got, exact = fn(x.to("tpu")).cpu().double(), fn(x.double())
    assert torch.equal(got.isnan(), exact.isnan())
    # an error of 1e-7 or so in the reduced argument, times the function's slope (tan's: 1 + tan^2)
    bound = 3e-7 * (1 + exact.square()) if fn is torch.tan else torch.full_like(exact, 3e-7)
    finite = ~exact.isnan()
    assert ((got - exact).abs()[finite] <= bound[finite]).all(), ((got - exact).abs() / bound).nan_to_num(0).max()
