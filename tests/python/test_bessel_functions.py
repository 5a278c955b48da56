"""special.bessel_j0, bessel_j1, bessel_y0 and bessel_y1 on the chip (vtpu/bessel_functions.py)
against the CPU's Math.h: both sides of the branch at 5, near 0, large arguments (the asymptotic
form's sine and cosine of x - pi/4), signs, zeros, infinities and NaN; float64 runs on the CPU,
named, rather than in f32."""
import pytest
import torch

import vtpu

FUNCTIONS = ["bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1"]
POINTS = torch.cat([torch.linspace(-30, 30, 2001),
                    torch.tensor([0.0, -0.0, 1e-6, -1e-6, 5.0, 4.9999995, 5.0000005, 1e3, 1e4, 1e6,
                                  float("inf"), float("-inf"), float("nan")])])


@pytest.mark.usefixtures("native_in_each_eager_mode")
@pytest.mark.parametrize("name", FUNCTIONS)
def test_bessel_functions_match_the_cpus(name):
    f = getattr(torch.special, name)
    torch.testing.assert_close(f(POINTS.to("tpu")).cpu(), f(POINTS), atol=1e-5, rtol=1e-5, equal_nan=True)


def test_float64_bessel_runs_on_the_cpu_named(cpu_fallback):
    vtpu.reset_stats()
    x = torch.tensor([0.5, 7.0], dtype=torch.float64)
    got = torch.special.bessel_y1(x.to("tpu")).cpu()
    assert got.dtype == torch.float64
    torch.testing.assert_close(got, torch.special.bessel_y1(x), atol=0, rtol=0)
    assert vtpu.stats()["cpu_fallbacks"] == {"aten::special_bessel_y1": 1}
