"""Special functions composed on the chip as the CPU evaluates them (vtpu/special_functions.py,
vtpu/orthogonal_polynomials.py): the modified Bessel family, ndtri, erfcx, log_ndtr,
spherical_bessel_j0, angle and the orthogonal polynomials against the CPU over their branches'
boundaries, with gradients where torch defines them, in each eager mode with no CPU op; float64
erfcx and log_ndtr run on the CPU, named, never through f32."""
import pytest
import torch
from cpu_comparison import assert_matches_cpu

import vtpu

S = torch.special

# every branch: both sides of the series' switch points (2, 8), zero, tiny, large, NaN and inf
POINTS = torch.cat([torch.linspace(-30, 30, 241), torch.tensor(
    [0.0, 1e-6, -1e-6, 1.99, 2.0, 2.01, 7.99, 8.0, 8.01, 0.49, 0.5, 0.51, float("nan"), float("inf"), -float("inf")])])

UNARY = {"i0": torch.i0, "i0e": S.i0e, "i1": S.i1, "i1e": S.i1e, "modified_bessel_i0": S.modified_bessel_i0,
         "modified_bessel_i1": S.modified_bessel_i1, "modified_bessel_k0": S.modified_bessel_k0,
         "modified_bessel_k1": S.modified_bessel_k1, "scaled_modified_bessel_k0": S.scaled_modified_bessel_k0,
         "scaled_modified_bessel_k1": S.scaled_modified_bessel_k1, "spherical_bessel_j0": S.spherical_bessel_j0,
         "angle": torch.angle}


@pytest.mark.usefixtures("native_in_each_eager_mode")
@pytest.mark.parametrize("name", sorted(UNARY))
def test_matches_the_cpu_on_every_branch(name):
    fn = UNARY[name]
    for x in (POINTS, POINTS.abs()):  # the K functions are NaN below 0: the positive half checks them
        torch.testing.assert_close(fn(x.to("tpu")).cpu(), fn(x), rtol=1e-5, atol=1e-6, equal_nan=True)


@pytest.mark.usefixtures("native_in_each_eager_mode")
def test_ndtri_in_its_three_ranges_and_outside_them():
    y = torch.cat([torch.rand(300, generator=torch.Generator().manual_seed(0)),
                   torch.tensor([0.0, 1.0, 0.5, 1e-20, 1e-10, 1 - 1e-7, 0.1353, 0.1354, 0.8646, 0.8647, -0.1, 1.1])])
    torch.testing.assert_close(S.ndtri(y.to("tpu")).cpu(), S.ndtri(y), rtol=1e-5, atol=2e-6, equal_nan=True)


@pytest.mark.usefixtures("native_in_each_eager_mode")
@pytest.mark.parametrize("fn", [torch.i0, S.i0e, S.i1, S.i1e, S.ndtri, torch.angle], ids=lambda f: f.__name__)
def test_gradients_use_torchs_formulas_on_the_chip(fn):
    x = torch.rand(40, generator=torch.Generator().manual_seed(1)) * 0.9 + 0.05  # inside ndtri's (0, 1)
    assert_matches_cpu(fn, x if fn is S.ndtri else (x - 0.5) * 20, rtol=1e-5, atol=1e-5)


POLYNOMIALS = [S.chebyshev_polynomial_t, S.chebyshev_polynomial_u, S.chebyshev_polynomial_v,
               S.chebyshev_polynomial_w, S.shifted_chebyshev_polynomial_t, S.shifted_chebyshev_polynomial_u,
               S.shifted_chebyshev_polynomial_v, S.shifted_chebyshev_polynomial_w, S.hermite_polynomial_h,
               S.hermite_polynomial_he, S.laguerre_polynomial_l, S.legendre_polynomial_p]


@pytest.mark.usefixtures("native_in_each_eager_mode")
@pytest.mark.parametrize("fn", POLYNOMIALS, ids=lambda f: f.__name__.removeprefix("special_"))
def test_polynomials_match_the_cpu_for_tensor_and_scalar_degrees(fn):
    # the ends (+-1, 0 for the shifted forms), inside and outside [-1, 1], and degrees around the
    # trigonometric forms' thresholds (4, 6, 8), fractional (truncated), negative and past Hermite's 128
    x = torch.cat([torch.linspace(-1.5, 1.5, 31), torch.tensor([1.0, -1.0, 0.0, 0.5, 2.0, -2.5])])
    n = torch.tensor([-3.0, -0.5, 0.0, 0.7, 1.0, 2.0, 3.9, 5, 6, 7, 8, 9, 10, 15, 30, 129])
    grid_x, grid_n = torch.meshgrid(x, n, indexing="ij")
    torch.testing.assert_close(fn(grid_x.to("tpu"), grid_n.to("tpu")).cpu(), fn(grid_x, grid_n), rtol=1e-4, atol=1e-4,
                               equal_nan=True)
    torch.testing.assert_close(fn(x.to("tpu"), 7).cpu(), fn(x, 7), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(fn(0.3, n.to("tpu")).cpu(), fn(0.3, n), rtol=1e-4, atol=1e-4, equal_nan=True)


def test_degrees_past_the_limit_run_on_the_cpu_named(no_fallback):
    x, n = torch.tensor([0.5, 1.5]), torch.tensor([3.0, 2000.0])
    with pytest.raises(NotImplementedError, match="chebyshev_polynomial_t cannot run on the chip: degrees above 1024"):
        S.chebyshev_polynomial_t(x.to("tpu"), n.to("tpu"))
    vtpu.set_cpu_fallback(True)
    try:
        with pytest.warns(UserWarning, match="degrees above 1024"):
            got = S.chebyshev_polynomial_t(x.to("tpu"), n.to("tpu"))
        torch.testing.assert_close(got.cpu(), S.chebyshev_polynomial_t(x, n), equal_nan=True)
    finally:
        vtpu.set_cpu_fallback(False)


@pytest.mark.usefixtures("native_in_each_eager_mode")
def test_hurwitz_zeta_over_its_domain():
    x = torch.tensor([1.0, 0.5, 1.5, 2.0, 3.0, 4.5, 6.0, 2.0, 3.0, 2.0, 2.5, 3.0, 5.0])
    q = torch.tensor([2.0, 2.0, 0.3, 1.0, 7.5, 20.0, 0.01, -3.0, -2.5, -0.5, -0.5, 100.0, 9.5])
    torch.testing.assert_close(S.zeta(x.to("tpu"), q.to("tpu")).cpu(), S.zeta(x, q), rtol=2e-5, atol=1e-6, equal_nan=True)
    torch.testing.assert_close(S.zeta(x.to("tpu"), 2.0).cpu(), S.zeta(x, 2.0), rtol=2e-5, atol=1e-6, equal_nan=True)


@pytest.mark.usefixtures("native_in_each_eager_mode")
@pytest.mark.parametrize("n", [0, 1, 2, 4])
def test_polygamma_and_its_gradient(n):
    x = torch.cat([torch.linspace(0.1, 12, 40), torch.tensor([-2.5, -0.3])])
    assert_matches_cpu(lambda t: torch.polygamma(n, t), x, rtol=5e-5, atol=1e-4)


@pytest.mark.usefixtures("native_in_each_eager_mode")
def test_erfinv_in_both_ranges_and_at_the_ends():
    y = torch.cat([torch.linspace(-0.999, 0.999, 301), torch.tensor([0.0, 0.7, -0.7, 0.7001, 1.0, -1.0, 1.5, float("nan")])])
    torch.testing.assert_close(torch.erfinv(y.to("tpu")).cpu(), torch.erfinv(y), rtol=1e-5, atol=2e-6, equal_nan=True)
    assert_matches_cpu(torch.erfinv, torch.linspace(-0.9, 0.9, 50), rtol=1e-5, atol=1e-5)


@pytest.mark.usefixtures("native_in_each_eager_mode")
def test_heaviside():
    x = torch.tensor([-2.0, 0.0, 3.0, float("nan"), -0.0])
    values = torch.tensor([0.5, 0.25, 0.5, 0.5, 0.75])
    assert torch.equal(torch.heaviside(x.to("tpu"), values.to("tpu")).cpu(), torch.heaviside(x, values))


@pytest.mark.usefixtures("native_in_each_eager_mode")
def test_erfcx_and_log_ndtr_on_every_branch():
    """erfcx: the interval polynomials (each interval of 400 / (4 + |x|)), the continued fraction
    past 50 and its one term past 5e7, the negative side's switches at -6.1 and -26.7;
    log_ndtr on both sides of -1. Gradients by torch's formulas."""
    x = torch.cat([torch.linspace(-30, 60, 9001), torch.tensor(
        [0.0, -0.0, 1e-8, 49.9, 50.1, 5e7, 6e7, 1e30, -6.09, -6.11, -26.6, -26.8, -1.01, -0.99, 3.99, 4.01,
         float("nan"), float("inf"), -float("inf")])])
    for fn in (S.erfcx, S.log_ndtr):
        torch.testing.assert_close(fn(x.to("tpu")).cpu(), fn(x), rtol=2e-6, atol=1e-6, equal_nan=True)
        assert_matches_cpu(fn, torch.linspace(-8, 12, 60), rtol=1e-5, atol=1e-5)
    integers = torch.arange(-5, 6)  # promoted to float, as the CPU does
    torch.testing.assert_close(S.erfcx(integers.to("tpu")).cpu(), S.erfcx(integers), rtol=2e-6, atol=0)


FLOAT64_CASES = [S.erfcx, S.log_ndtr]
FLOAT64_IDS = ["erfcx", "log_ndtr"]


@pytest.mark.parametrize("fn", FLOAT64_CASES, ids=FLOAT64_IDS)
def test_float64_is_named_without_the_fallback(fn, no_fallback):
    x = torch.tensor([-3.0, 0.3, 1.0 + 1e-12, 40.0], dtype=torch.float64)
    with pytest.raises(NotImplementedError, match="cannot run on the chip: float64 inputs"):
        fn(x.to("tpu"))


@pytest.mark.usefixtures("cpu_fallback")
@pytest.mark.parametrize("fn", FLOAT64_CASES, ids=FLOAT64_IDS)
def test_float64_runs_on_the_cpu_never_through_f32(fn):
    x = torch.tensor([-3.0, 0.3, 1.0 + 1e-12, 40.0], dtype=torch.float64)
    assert torch.equal(fn(x.to("tpu")).cpu(), fn(x))  # the CPU's float64 values exactly
