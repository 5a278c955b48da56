"""The SVD on the chip by one-sided Jacobi (vtpu/linalg_svd.py) and what is built on it
(vtpu/linalg_pseudoinverse.py): singular values against the CPU's, U diag(S) V^H against the
input and U, V orthonormal (the vectors' signs are the algorithm's), for square, tall, wide,
batched, rank-deficient and zero matrices, reduced and full, with and without U and V, empty
inputs; svdvals' and pinv's gradients; pinv, matrix_rank (every overload), cond and the nuclear
norm against the CPU; in both eager modes with no CPU op. Too many columns fall back, named (the
hermitian forms: test_linalg_eigh.py)."""
import pytest
import torch
from cpu_comparison import assert_matches_cpu

SHAPES = [(5, 5), (7, 3), (3, 7), (2, 6, 4), (3, 4, 5), (1, 1), (33, 20)]


def matrix(shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def rank_deficient():
    a = matrix((6, 5), 1)
    a[:, 3] = a[:, 0] - a[:, 1]  # rank 4
    return a


def check_decomposition(a, full_matrices):
    u, s, vh = (t.cpu() for t in torch.linalg.svd(a.to("tpu"), full_matrices=full_matrices))
    m, n = a.shape[-2:]
    k = min(m, n)
    assert u.shape == (*a.shape[:-2], m, m if full_matrices else k) and vh.shape == (*a.shape[:-2], n if full_matrices else k, n)
    torch.testing.assert_close(s, torch.linalg.svdvals(a), rtol=1e-5, atol=1e-5)
    assert (s[..., :-1] >= s[..., 1:]).all()
    torch.testing.assert_close((u[..., :k] * s.unsqueeze(-2)) @ vh[..., :k, :], a, rtol=1e-5, atol=1e-5)
    for q in (u, vh.mT):
        torch.testing.assert_close(q.mT @ q, torch.eye(q.shape[-1]).expand_as(q.mT @ q), rtol=0, atol=1e-5)


@pytest.mark.usefixtures("native_in_each_eager_mode")
@pytest.mark.parametrize("full_matrices", [False, True])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_decomposition(shape, full_matrices):
    check_decomposition(matrix(shape), full_matrices)


@pytest.mark.usefixtures("native_in_each_eager_mode")
@pytest.mark.parametrize("full_matrices", [False, True])
def test_zero_singular_values_still_give_orthonormal_vectors(full_matrices):
    for a in (rank_deficient(), rank_deficient().mT, torch.zeros(4, 3)):
        check_decomposition(a, full_matrices)


@pytest.mark.usefixtures("native_in_each_eager_mode")
def test_empty_inputs_and_values_only():
    for shape in [(3, 0), (0, 3), (2, 0, 0)]:
        for full in (False, True):
            got, want = torch.linalg.svd(torch.zeros(shape, device="tpu"), full_matrices=full), torch.linalg.svd(torch.zeros(shape), full_matrices=full)
            for g, w in zip(got, want):
                assert torch.equal(g.cpu(), w)
    a = matrix((4, 6), 2)
    got, want = torch.svd(a.to("tpu"), compute_uv=False), torch.svd(a, compute_uv=False)
    torch.testing.assert_close(got.S.cpu(), want.S)
    assert torch.equal(got.U.cpu(), want.U) and torch.equal(got.V.cpu(), want.V)  # zeros, as the CPU gives


@pytest.mark.usefixtures("native_in_each_eager_mode")
@pytest.mark.parametrize("fn", [torch.linalg.svdvals, torch.linalg.pinv, lambda t: torch.linalg.matrix_norm(t, "nuc"),
                                lambda t: torch.linalg.cond(t), torch.pinverse],
                         ids=["svdvals", "pinv", "nuclear norm", "cond", "pinverse"])
def test_functions_of_the_svd_and_their_gradients(fn):
    assert_matches_cpu(fn, matrix((2, 5, 4), 3), rtol=1e-4, atol=1e-4)


@pytest.mark.usefixtures("native_in_each_eager_mode")
def test_tolerances_of_pinv_and_matrix_rank():
    a = rank_deficient()
    calls = [lambda t: torch.linalg.pinv(t), lambda t: torch.linalg.pinv(t, rtol=0.3), lambda t: torch.linalg.pinv(t, atol=0.5),
             lambda t: torch.linalg.pinv(t, atol=torch.tensor(0.5, device=t.device), rtol=torch.tensor(0.01, device=t.device)),
             lambda t: torch.linalg.pinv(t, rcond=0.2)]
    for call in calls:
        torch.testing.assert_close(call(a.to("tpu")).cpu(), call(a), rtol=1e-4, atol=1e-4)
    ranks = [lambda t: torch.linalg.matrix_rank(t), lambda t: torch.linalg.matrix_rank(t, atol=1.0, rtol=0.0),
             lambda t: torch.linalg.matrix_rank(t, tol=0.5), lambda t: torch.linalg.matrix_rank(t, torch.tensor(2.0, device=t.device)),
             lambda t: torch.linalg.matrix_rank(t, rtol=0.5), lambda t: torch.linalg.matrix_rank(t.expand(3, 6, 5))]
    for call in ranks:
        got, want = call(a.to("tpu")), call(a)
        assert got.dtype == torch.long and torch.equal(got.cpu(), want)
    assert torch.equal(torch.linalg.matrix_rank(torch.zeros(2, 0, 3, device="tpu")).cpu(), torch.zeros(2, dtype=torch.long))


def test_too_many_columns_fall_back_named(no_fallback):
    with pytest.raises(NotImplementedError, match="_linalg_svd cannot run on the chip: matrices of 257 columns"):
        torch.linalg.svdvals(torch.zeros(300, 257, device="tpu"))


def test_singular_values_are_as_accurate_as_float32_allows(no_fallback):
    """The norms of A v (not the rotated columns', which collect a rounding per rotation): within
    2e-7 of float64's singular values relative to the largest, at 64 columns (LAPACK's f32: 4e-7;
    bench/linalg_accuracy.py)."""
    a = torch.randn(71, 64, generator=torch.Generator().manual_seed(9), dtype=torch.float64)
    truth = torch.linalg.svdvals(a)
    chip = torch.linalg.svdvals(a.float().to("tpu")).cpu().double()
    assert ((chip - truth).abs().max() / truth.max()).item() < 2e-7
