"""The symmetric eigendecomposition on the chip by two-sided Jacobi: each step rotates n/2
disjoint index pairs (p, q) at once, A <- J^T A J with the rotation zeroing every a_pq (Golub
and Van Loan's symmetric Schur pair), in the SVD's round-robin order and sweep count
(vtpu/jacobi_sweeps.py); the eigenvectors are then the product of the rotations and the
eigenvalues their Rayleigh quotients v^T A v with the input (the rotated diagonal collects a
rounding at every rotation). A pair already zero to f32 precision (|a_pq| at most eps times
sqrt(|a_pp a_qq|)) gets the identity, exactly. As LAPACK, only the triangle UPLO names is read;
the eigenvalues come in ascending order. The eigenvectors' signs (and the basis of a repeated
eigenvalue's space) are the algorithm's, not LAPACK's, as between any two backends.

Registered at PrivateUse1 for _linalg_eigh, so eigh, eigvalsh, and the hermitian forms of pinv
and matrix_rank (vtpu/linalg_pseudoinverse.py) run on the chip, and torch's derivative formula
too. Orders above jacobi_sweeps.MAX_ORDER fall back, named.
"""
from __future__ import annotations

import torch

from . import jacobi_sweeps
from .composed_fallback import run_on_cpu
from .python_kernels import register


def _symmetric(a, upper):
    """The symmetric matrix a's `upper` (or lower) triangle defines."""
    triangle = a.triu() if upper else a.tril()
    return triangle + (a.triu(1) if upper else a.tril(-1)).mT


def _rotation(a, order, n):
    """(c, s) of the rotations zeroing a_pq for the step's pairs (Golub and Van Loan's
    symmetric Schur pair). A pair with |a_pq| at most eps sqrt(|a_pp a_qq|) is converged."""
    half = n // 2
    first, second = order[:half], order[half:]
    diagonal = a.diagonal(dim1=-2, dim2=-1)
    a_pp, a_qq = diagonal.index_select(-1, first), diagonal.index_select(-1, second)
    a_pq = a.flatten(-2).index_select(-1, first * n + second)
    tau = (a_qq - a_pp) / (2 * a_pq)
    t = torch.where(tau >= 0, 1.0, -1.0) / (tau.abs() + torch.sqrt(1 + tau * tau))
    return jacobi_sweeps.identity_if(a_pq.abs() <= torch.finfo(a.dtype).eps * (a_pp * a_qq).abs().sqrt(), t)


def _jacobi(a):
    """The eigenvectors (columns) of a symmetric a: the product of the rotations."""
    n = a.shape[-1]
    padded = n + n % 2
    if padded != n:  # a zero row and column: no rotation ever involves them
        a = torch.nn.functional.pad(a, (0, 1, 0, 1))
    v = torch.eye(padded, dtype=a.dtype, device=a.device).expand(*a.shape[:-2], padded, padded).contiguous()
    for order, back in jacobi_sweeps.steps(padded, a.device):
        c, s = _rotation(a, order, padded)
        rotate = lambda x: jacobi_sweeps.rotate(x, c, s, order, back)  # noqa: E731
        a = rotate(rotate(a).mT).mT  # J^T A J: the columns, then the rows
        v = rotate(v)
    return v[..., :n, :n]


def linalg_eigh(a, UPLO="L", compute_v=True):
    n = a.shape[-1]
    if n > jacobi_sweeps.MAX_ORDER:
        return run_on_cpu("_linalg_eigh", f"matrices of order {n} (above {jacobi_sweeps.MAX_ORDER}; n - 1 Jacobi steps per sweep)",
                          a, UPLO, compute_v)
    if n == 0:
        return a.new_zeros(a.shape[:-1]), a.clone() if compute_v else a.new_empty(0)
    symmetric = _symmetric(a, UPLO == "U")
    vectors = _jacobi(symmetric)
    vectors = vectors / torch.linalg.vector_norm(vectors, dim=-2, keepdim=True)
    # Rayleigh quotients v^T A v of the final vectors: second order in their error, where the
    # rotated diagonal collects a rounding at every rotation
    values, order = ((symmetric @ vectors) * vectors).sum(-2).sort(-1)
    if not compute_v:
        return values, a.new_empty(0)
    return values, vectors.gather(-1, order.unsqueeze(-2).expand_as(vectors))


register("_linalg_eigh", linalg_eigh, "PrivateUse1")
