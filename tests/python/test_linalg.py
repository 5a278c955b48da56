"""Linear algebra composed on the chip (vtpu/linalg_triangular.py, vtpu/linalg_lu.py): Cholesky,
triangular solves, LU with partial pivoting (pivots as LAPACK's), and solve, inv, det and slogdet
built on them, forward and gradients against the CPU in each eager mode with no CPU op; the
factorizations torch's derivative formulas read back; failures reported as the CPU reports them."""
import pytest
import torch
from cpu_comparison import assert_matches_cpu

import vtpu


def well_conditioned(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    n = shape[-1]
    return torch.randn(*shape, generator=g) + n * torch.eye(n)  # diagonally dominant, shuffled by pivoting below


def positive_definite(*shape, seed=0):
    a = torch.randn(*shape, generator=torch.Generator().manual_seed(seed))
    return a @ a.mT + shape[-1] * torch.eye(shape[-1])


pytestmark = pytest.mark.usefixtures("native_in_each_eager_mode")


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_and_its_gradient(upper):
    a = positive_definite(2, 6, 6)
    assert_matches_cpu(lambda t: torch.linalg.cholesky((t + t.mT) / 2, upper=upper), a, atol=1e-5, rtol=1e-5)


def test_cholesky_reports_the_first_failing_order_as_lapack():
    a = positive_definite(3, 4, 4)
    a[1, 2, 2] = -50.0  # order 3 of the second matrix is not positive definite
    _, info = torch.linalg.cholesky_ex(a.to("tpu"))
    assert info.cpu().tolist() == torch.linalg.cholesky_ex(a)[1].tolist() == [0, 3, 0]
    with pytest.raises(torch.linalg.LinAlgError, match="not positive-definite"):
        torch.linalg.cholesky(a.to("tpu"))


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("unitriangular", [False, True])
def test_solve_triangular_every_form_with_broadcast_batches(upper, left, unitriangular):
    a = well_conditioned(2, 1, 5, 5, seed=1)
    b = torch.randn(3, 5, 4) if left else torch.randn(3, 4, 5)
    fn = lambda x, y: torch.linalg.solve_triangular(x, y, upper=upper, left=left, unitriangular=unitriangular)  # noqa: E731
    assert_matches_cpu(fn, a, b, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("upper", [False, True])
def test_a_failed_cholesky_leaves_what_lapack_leaves(upper):
    # The columns before the failing pivot factored, the pivot's value before its square root,
    # the input's triangle after it (before: NaN there); with upper=True the input's upper
    # triangle is the one read (a non-symmetric input tells).
    a = positive_definite(4, 4, seed=1)
    cases = []
    for at in [(0, 0), (2, 1), (3, 3)]:
        with_nan = a.clone()
        with_nan[at] = float("nan")
        cases.append(with_nan)
    cases += [torch.tensor([[4.0, 2.0, 1.0], [2.0, -3.0, 0.0], [1.0, 0.0, 2.0]]),
              positive_definite(3, 3, seed=2) + torch.triu(torch.ones(3, 3), 1),
              torch.stack([a, cases[1]])]
    for case in cases:
        want = torch.linalg.cholesky_ex(case, upper=upper)
        got = torch.linalg.cholesky_ex(case.to("tpu"), upper=upper)
        assert torch.equal(got.info.cpu(), want.info)
        torch.testing.assert_close(got.L.cpu(), want.L, atol=1e-5, rtol=1e-5, equal_nan=True)


def test_legacy_triangular_solve_cholesky_solve_and_inverse():
    a, b = well_conditioned(5, 5, seed=2), torch.randn(5, 3)
    assert_matches_cpu(lambda x, y: torch.triangular_solve(y, x, upper=False, transpose=True)[0], a, b, atol=1e-5, rtol=1e-5)
    factor = torch.linalg.cholesky(positive_definite(5, 5, seed=3))
    for upper in (False, True):
        f = factor.mT.contiguous() if upper else factor
        assert_matches_cpu(lambda x, y: torch.cholesky_solve(y, x, upper=upper), f, b, atol=1e-4, rtol=1e-4)
        assert_matches_cpu(lambda x: torch.cholesky_inverse(x, upper=upper), f, atol=1e-4, rtol=1e-4)


def test_lu_factor_picks_the_cpus_pivots_and_unpacks_to_the_cpus_factors():
    a = torch.randn(3, 6, 6, generator=torch.Generator().manual_seed(4))
    lu, pivots = torch.linalg.lu_factor(a.to("tpu"))
    want_lu, want_pivots = torch.linalg.lu_factor(a)
    assert torch.equal(pivots.cpu(), want_pivots)
    torch.testing.assert_close(lu.cpu(), want_lu, atol=1e-5, rtol=1e-5)
    for got, want in zip(torch.linalg.lu(a.to("tpu")), torch.linalg.lu(a)):
        torch.testing.assert_close(got.cpu(), want, atol=1e-5, rtol=1e-5)
    wide = torch.randn(4, 7, generator=torch.Generator().manual_seed(5))  # rectangular: min(m, n) pivots
    for got, want in zip(torch.linalg.lu(wide.to("tpu")), torch.linalg.lu(wide)):
        torch.testing.assert_close(got.cpu(), want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("adjoint", [False, True])
def test_lu_solve(left, adjoint):
    lu, pivots = torch.linalg.lu_factor(torch.randn(2, 5, 5, generator=torch.Generator().manual_seed(6)))
    b = torch.randn(2, 5, 3) if left else torch.randn(2, 3, 5)
    got = torch.linalg.lu_solve(lu.to("tpu"), pivots.to("tpu"), b.to("tpu"), left=left, adjoint=adjoint)
    torch.testing.assert_close(got.cpu(), torch.linalg.lu_solve(lu, pivots, b, left=left, adjoint=adjoint),
                               atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("b_shape,left", [((5, 2), True), ((5,), True), ((3, 5, 2), True), ((2, 5), False)])
def test_solve_and_its_gradients(b_shape, left):
    a, b = torch.randn(5, 5, generator=torch.Generator().manual_seed(7)), torch.randn(b_shape)
    assert_matches_cpu(lambda x, y: torch.linalg.solve(x, y, left=left), a, b, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("fn", [torch.linalg.inv, torch.linalg.det, lambda t: torch.linalg.slogdet(t)[1], torch.logdet],
                         ids=["inv", "det", "slogdet", "logdet"])
def test_inverse_and_determinants_with_their_gradients(fn):
    a = torch.randn(3, 5, 5, generator=torch.Generator().manual_seed(8))
    a = a @ a.mT + torch.eye(5)  # logdet needs a positive determinant
    assert_matches_cpu(fn, a, atol=1e-4, rtol=1e-4)
    assert_matches_cpu(fn, a.mT, atol=1e-4, rtol=1e-4)  # a non-contiguous input: the other factorization


def test_a_singular_matrix_has_determinant_zero_and_slogdet_sign_zero():
    a = torch.tensor([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.0, 1.0, 5.0]])
    assert torch.linalg.det(a.to("tpu")).item() == 0.0
    sign, logabsdet = torch.linalg.slogdet(a.to("tpu"))
    assert sign.item() == 0.0 and logabsdet.item() == float("-inf")
    assert torch.linalg.lu_factor_ex(a.to("tpu")).info.item() == torch.linalg.lu_factor_ex(a).info.item() == 3


def test_matrices_above_the_order_limit_are_declined_named():
    big = torch.eye(vtpu.linalg_triangular.MAX_ORDER + 1, device="tpu")
    with pytest.raises(NotImplementedError, match="linalg_cholesky_ex cannot run on the chip: matrices of order 513"):
        torch.linalg.cholesky(big)
    with pytest.raises(NotImplementedError, match="linalg_lu_factor_ex cannot run on the chip: matrices of order 513"):
        torch.linalg.lu_factor(big)


@pytest.mark.parametrize("shape", [(6, 4), (4, 6), (2, 5, 5)], ids=str)
@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
def test_qr_matches_lapacks_signs_and_reflectors(shape, mode):
    a = torch.randn(*shape, generator=torch.Generator().manual_seed(9))
    for got, want in zip(torch.linalg.qr(a.to("tpu"), mode=mode), torch.linalg.qr(a, mode=mode)):
        torch.testing.assert_close(got.cpu(), want, atol=1e-5, rtol=1e-5)
    for got, want in zip(torch.geqrf(a.to("tpu")), torch.geqrf(a)):
        torch.testing.assert_close(got.cpu(), want, atol=1e-5, rtol=1e-5)


def test_qr_gradients_and_the_reflector_products():
    a = torch.randn(6, 4, generator=torch.Generator().manual_seed(10))
    assert_matches_cpu(lambda t: torch.cat([m.flatten() for m in torch.linalg.qr(t)]), a, atol=1e-4, rtol=1e-4)
    reflectors, tau = torch.geqrf(a)
    assert_matches_cpu(torch.linalg.householder_product, reflectors, tau, atol=1e-5, rtol=1e-5)
    for left in (True, False):
        for transpose in (False, True):
            other = torch.randn(6, 3) if left else torch.randn(3, 6)
            got = torch.ormqr(reflectors.to("tpu"), tau.to("tpu"), other.to("tpu"), left, transpose).cpu()
            torch.testing.assert_close(got, torch.ormqr(reflectors, tau, other, left, transpose), atol=1e-5, rtol=1e-5)


def test_bfloat16_addmm_rounds_once_as_the_cpu(native_in_each_eager_mode):
    # beta * c + alpha * (a @ b) in f32, one rounding to bf16: the CPU's result bit for bit
    dtype = torch.bfloat16
    gen = torch.Generator().manual_seed(0)
    a, b, c = (torch.randn(48, 40, generator=gen).to(dtype), torch.randn(40, 56, generator=gen).to(dtype),
               torch.randn(48, 56, generator=gen).to(dtype))
    for beta, alpha in [(0.5, 2.0), (1, 1), (-4.775, 2.0315), (0, 3.0)]:
        got = torch.addmm(c.to("tpu"), a.to("tpu"), b.to("tpu"), beta=beta, alpha=alpha).cpu()
        assert torch.equal(got, torch.addmm(c, a, b, beta=beta, alpha=alpha)), (beta, alpha)


def test_muons_newton_schulz_iterations_match_the_cpu_bit_for_bit(native_in_each_eager_mode):
    # torch's Muon orthogonalises in bf16 with matmuls and addmms; each rounds as the CPU's does,
    # so the same bf16 input gives the same update
    from torch.optim._muon import _zeropower_via_newtonschulz as newton_schulz

    grad = torch.randn(24, 40, generator=torch.Generator().manual_seed(1))
    want = newton_schulz(grad, (3.4445, -4.7750, 2.0315), 5, 1e-7)
    got = newton_schulz(grad.to("tpu"), (3.4445, -4.7750, 2.0315), 5, 1e-7).cpu()
    assert torch.equal(got, want)


def test_householder_product_keeps_a_nan_reflector_out_of_earlier_columns():
    # Reflector 1 comes from a column holding NaN (its tau is NaN): LAPACK's orgqr applies it to
    # Q's columns from 1 on, so column 0 stays finite; applied to every column, NaN * 0 was NaN.
    a = torch.randn(5, 3, generator=torch.Generator().manual_seed(4))
    a[3, 1] = float("nan")
    reflectors, tau = torch.geqrf(a)
    want = torch.linalg.householder_product(reflectors, tau)
    got = torch.linalg.householder_product(reflectors.to("tpu"), tau.to("tpu")).cpu()
    assert want[:, 0].isfinite().all() and want[:, 1:].isnan().all()
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5, equal_nan=True)
