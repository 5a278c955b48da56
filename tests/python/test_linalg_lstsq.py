"""torch.linalg.lstsq on the chip (vtpu/linalg_lstsq.py) against the CPU for every driver: tall,
wide and square systems, batches, a vector right-hand side, rank deficiency (the SVD drivers'
minimum-norm solution and rank), residuals where the CPU gives them, the solution's gradient;
in both eager modes with no CPU op. Empty matrices fall back, named."""
import pytest
import torch
from cpu_comparison import assert_matches_cpu

DRIVERS = ["gels", "gelsy", "gelsd", "gelss"]
SYSTEMS = [((5, 3), (5, 2)), ((3, 5), (3, 2)), ((2, 6, 4), (2, 6, 3)), ((4, 4), (4,)), ((2, 5, 3), (2, 5))]


def same(got, want):
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        torch.testing.assert_close(g.cpu(), w, rtol=1e-4, atol=1e-4)


@pytest.mark.usefixtures("native_in_each_eager_mode")
@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("system", SYSTEMS, ids=str)
def test_matches_the_cpu(system, driver):
    gen = torch.Generator().manual_seed(len(system[0]) + system[0][-1])
    a, b = torch.randn(*system[0], generator=gen), torch.randn(*system[1], generator=gen)
    a = a + 3 * torch.eye(*system[0][-2:])  # well conditioned: the drivers' methods agree to f32 rounding
    same(torch.linalg.lstsq(a.to("tpu"), b.to("tpu"), driver=driver), torch.linalg.lstsq(a, b, driver=driver))


@pytest.mark.usefixtures("native_in_each_eager_mode")
@pytest.mark.parametrize("driver", ["gelsy", "gelsd", "gelss"])
def test_rank_deficient_systems_get_the_minimum_norm_solution(driver):
    gen = torch.Generator().manual_seed(3)
    a, b = torch.randn(6, 4, generator=gen), torch.randn(6, 2, generator=gen)
    a[:, 3] = a[:, 0]
    got, want = torch.linalg.lstsq(a.to("tpu"), b.to("tpu"), driver=driver), torch.linalg.lstsq(a, b, driver=driver)
    same(got, want)
    assert int(got.rank) == 3
    if driver == "gelsy":  # its rank at a coarse rcond is a condition estimate's, not a singular value count
        return
    torch.testing.assert_close(torch.linalg.lstsq(a.to("tpu"), b.to("tpu"), rcond=0.5, driver=driver).solution.cpu(),
                               torch.linalg.lstsq(a, b, rcond=0.5, driver=driver).solution, rtol=1e-4, atol=1e-4)


@pytest.mark.usefixtures("native_in_each_eager_mode")
def test_gradient():
    gen = torch.Generator().manual_seed(4)
    a, b = torch.randn(6, 3, generator=gen) + torch.eye(6, 3) * 2, torch.randn(6, 2, generator=gen)
    assert_matches_cpu(lambda x, y: torch.linalg.lstsq(x, y, driver="gelsd").solution, a, b, rtol=1e-4, atol=1e-4)


def test_empty_matrices_fall_back_named(no_fallback):
    with pytest.raises(NotImplementedError, match="linalg_lstsq cannot run on the chip: empty matrices"):
        torch.linalg.lstsq(torch.zeros(0, 3, device="tpu"), torch.zeros(0, 2, device="tpu"))


def test_too_few_dimensions_are_the_cpus_errors(no_fallback):
    # Read as matrices, a vector failed to unpack its shape (ValueError) before torch's check.
    with pytest.raises(RuntimeError, match="input must have at least 2 dimensions"):
        torch.linalg.lstsq(torch.randn(3, device="tpu"), torch.randn(3, device="tpu"))
    with pytest.raises(RuntimeError, match="other must have at least 1 dimension"):
        torch.linalg.lstsq(torch.randn(3, 3, device="tpu"), torch.tensor(1.0, device="tpu"))
