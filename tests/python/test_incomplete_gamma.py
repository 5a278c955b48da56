"""The regularized incomplete gamma functions on the chip (vtpu/incomplete_gamma.py) against the
CPU and float64: every method the CPU picks (power series, small-x series, continued fraction,
the asymptotic expansion for large a near x, in both of its regimes) and every boundary value,
NaN and the infinities included, in each eager mode with no CPU op; bfloat16 rounds once; the
gradient with respect to x; integer operands refused with the CPU's message; float64 on the CPU,
named."""
import pytest
import torch

import vtpu

G = torch.Generator().manual_seed(0)
# (a, x): small a and x (the series), x well past a (the continued fraction), x below 0.5 and a
# tiny (the small-x series), a in (20, 200) and x within 30% of it, a past 200 and x within
# 4.5 sqrt(a) of it (the asymptotic expansion), and x just either side of its switch points.
REGIONS = {
    "series": (torch.rand(64, generator=G) * 5, torch.rand(64, generator=G) * 4),
    "continued_fraction": (torch.rand(64, generator=G) * 5, 6 + torch.rand(64, generator=G) * 40),
    "small_x": (torch.rand(64, generator=G) * 0.3, torch.rand(64, generator=G) * 0.5),
    "asymptotic": (20 + torch.rand(64, generator=G) * 170, None),
    "asymptotic_large_a": (250 + torch.rand(64, generator=G) * 2000, None),
    "switch_points": (torch.tensor([0.5, 2.0, 0.3, 1.2, 3.0, 0.05]), torch.tensor([0.5, 1.1, 0.51, 1.1, 1.0, 0.49])),
}


def region(name):
    a, x = REGIONS[name]
    if x is None:  # near a, within the expansion's reach
        x = a * (1 + (torch.rand(a.shape, generator=G) - 0.5) * (0.5 if name == "asymptotic" else 0.2))
    return a, x


@pytest.mark.usefixtures("native_in_each_eager_mode")
@pytest.mark.parametrize("name", sorted(REGIONS))
@pytest.mark.parametrize("fn", [torch.igamma, torch.igammac], ids=lambda f: f.__name__)
def test_every_method_matches_the_cpu_and_float64(fn, name):
    a, x = region(name)
    got = fn(a.to("tpu"), x.to("tpu")).cpu()
    torch.testing.assert_close(got, fn(a, x), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(got.double(), fn(a.double(), x.double()), rtol=1e-4, atol=2e-6)


@pytest.mark.usefixtures("native_in_each_eager_mode")
@pytest.mark.parametrize("fn", [torch.igamma, torch.igammac], ids=lambda f: f.__name__)
def test_boundary_values_nan_and_infinities_are_the_cpus(fn):
    values = [0.0, 1.0, -1.0, float("inf"), float("nan"), 3.0]
    a, x = torch.tensor(values).repeat_interleave(6), torch.tensor(values).repeat(6)
    torch.testing.assert_close(fn(a.to("tpu"), x.to("tpu")).cpu(), fn(a, x), equal_nan=True)


@pytest.mark.usefixtures("native_in_each_eager_mode")
def test_bfloat16_rounds_once_and_broadcasts():
    a, x = torch.rand(5, 1, generator=G) * 4, torch.rand(7, generator=G) * 6
    for dtype in (torch.bfloat16, torch.float16):
        got = torch.igammac(a.to("tpu", dtype), x.to("tpu", dtype)).cpu()
        assert got.shape == (5, 7) and got.dtype == dtype
        torch.testing.assert_close(got, torch.igammac(a.to(dtype).float(), x.to(dtype).float()).to(dtype))


@pytest.mark.usefixtures("native_in_each_eager_mode")
def test_gradient_with_respect_to_x():
    a, x = torch.rand(8, generator=G) * 3 + 0.2, torch.rand(8, generator=G) * 5 + 0.1
    grads = []
    for device in ("cpu", "tpu"):
        t = x.clone().to(device).requires_grad_()
        torch.igamma(a.to(device), t).sum().backward()
        grads.append(t.grad.cpu())
    torch.testing.assert_close(grads[1], grads[0], rtol=1e-4, atol=1e-6)


def test_integers_are_refused_and_float64_is_named(no_fallback):
    ints = torch.tensor([1, 2])
    with pytest.raises(NotImplementedError, match="\"igamma_cpu\" not implemented for 'Long'"):
        torch.igamma(ints.to("tpu"), ints.to("tpu"))
    with pytest.raises(NotImplementedError, match=r"aten::igammac cannot run on the chip: float64 inputs"):
        torch.igammac(torch.ones(2, dtype=torch.float64, device="tpu"), torch.ones(2, dtype=torch.float64, device="tpu"))
