"""special.airy_ai on the chip (vtpu/airy_function.py) against the CPU's Math.h: the oscillating
and decaying asymptotic forms, the power series between (each element summing the terms the
CPU's loop sums), the branch points, the cut to 0 past 103.892, infinities and NaN."""
import pytest
import torch

import vtpu

POINTS = torch.cat([torch.linspace(-60, 120, 4001), torch.linspace(-2.2, 2.2, 2001),
                    torch.tensor([0.0, -0.0, -2.09, 2.09, 8.3203353, 103.892, 103.9, -1e4,
                                  float("inf"), float("-inf"), float("nan")])])


@pytest.mark.usefixtures("native_in_each_eager_mode")
def test_airy_ai_matches_the_cpus():
    got = torch.special.airy_ai(POINTS.to("tpu")).cpu()
    torch.testing.assert_close(got, torch.special.airy_ai(POINTS), atol=1e-5, rtol=1e-5, equal_nan=True)


def test_float64_airy_runs_on_the_cpu_named(cpu_fallback):
    vtpu.reset_stats()
    x = torch.tensor([-3.0, 0.5, 4.0], dtype=torch.float64)
    torch.testing.assert_close(torch.special.airy_ai(x.to("tpu")).cpu(), torch.special.airy_ai(x), atol=0, rtol=0)
    assert vtpu.stats()["cpu_fallbacks"] == {"aten::special_airy_ai": 1}
