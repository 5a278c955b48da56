"""The symmetric eigendecomposition on the chip by two-sided Jacobi (vtpu/linalg_eigh.py):
eigenvalues against the CPU's (ascending), V diag(w) V^T against the matrix the UPLO triangle
defines and V orthonormal (the vectors' signs are the algorithm's, not LAPACK's), for odd and
even orders, batches, repeated eigenvalues, both triangles of a non-symmetric input, empty
inputs; eigvalsh's gradient and the hermitian pinv and matrix_rank against the CPU; in both
eager modes with no CPU op. Large orders fall back, named."""
import pytest
import torch
from cpu_comparison import assert_matches_cpu


def matrix(shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def check(a, uplo):
    w, v = (t.cpu() for t in torch.linalg.eigh(a.to("tpu"), UPLO=uplo))
    want_w, want_v = torch.linalg.eigh(a, UPLO=uplo)
    torch.testing.assert_close(w, want_w, rtol=1e-5, atol=1e-5)
    symmetric = (want_v * want_w.unsqueeze(-2)) @ want_v.mT
    torch.testing.assert_close((v * w.unsqueeze(-2)) @ v.mT, symmetric, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(v.mT @ v, torch.eye(a.shape[-1]).expand_as(v), rtol=0, atol=1e-5)


@pytest.mark.usefixtures("native_in_each_eager_mode")
@pytest.mark.parametrize("uplo", ["L", "U"])
@pytest.mark.parametrize("shape", [(5, 5), (4, 4), (2, 6, 6), (3, 1, 1), (20, 20)], ids=str)
def test_decomposition(shape, uplo):
    check(matrix(shape), uplo)  # not symmetric: only the named triangle counts


@pytest.mark.usefixtures("native_in_each_eager_mode")
def test_repeated_eigenvalues_and_a_diagonal_input():
    q = torch.linalg.qr(matrix((6, 6), 1))[0]
    check(q @ torch.diag(torch.tensor([1.0, 1, 1, -2, 3, 3])) @ q.mT, "L")
    check(torch.diag(torch.tensor([3.0, -1, 2, 0, 5])), "U")


@pytest.mark.usefixtures("native_in_each_eager_mode")
def test_empty_inputs():
    for shape in [(0, 0), (2, 0, 0), (0, 4, 4)]:
        for got, want in zip(torch.linalg.eigh(torch.zeros(shape, device="tpu")), torch.linalg.eigh(torch.zeros(shape))):
            assert got.shape == want.shape
        assert torch.linalg.eigvalsh(torch.zeros(shape, device="tpu")).shape == torch.linalg.eigvalsh(torch.zeros(shape)).shape


@pytest.mark.usefixtures("native_in_each_eager_mode")
@pytest.mark.parametrize("fn", [torch.linalg.eigvalsh, lambda t: torch.linalg.pinv(t, hermitian=True)], ids=["eigvalsh", "pinv"])
def test_functions_of_the_eigenvalues_and_their_gradients(fn):
    a = matrix((2, 5, 5), 2)
    assert_matches_cpu(lambda t: fn(t + t.mT), a, rtol=1e-4, atol=1e-4)


@pytest.mark.usefixtures("native_in_each_eager_mode")
def test_hermitian_matrix_rank():
    a = matrix((6, 4), 3)
    a = a @ a.mT  # rank 4 of 6
    for call in (lambda t: torch.linalg.matrix_rank(t, hermitian=True), lambda t: torch.linalg.matrix_rank(t, atol=1.0, hermitian=True)):
        assert torch.equal(call(a.to("tpu")).cpu(), call(a))


def test_large_orders_fall_back_named(no_fallback):
    with pytest.raises(NotImplementedError, match="_linalg_eigh cannot run on the chip: matrices of order 257"):
        torch.linalg.eigvalsh(torch.zeros(257, 257, device="tpu"))


def test_eigenvalues_are_as_accurate_as_float32_allows(no_fallback):
    """Rayleigh quotients of the final vectors: within 3e-7 of float64's eigenvalues relative to
    the largest magnitude, at order 64 (LAPACK's f32: 7e-7; bench/linalg_accuracy.py)."""
    a = torch.randn(64, 64, generator=torch.Generator().manual_seed(9), dtype=torch.float64)
    a = a + a.mT
    truth = torch.linalg.eigvalsh(a)
    chip = torch.linalg.eigvalsh(a.float().to("tpu")).cpu().double()
    assert ((chip - truth).abs().max() / truth.abs().max()).item() < 3e-7
