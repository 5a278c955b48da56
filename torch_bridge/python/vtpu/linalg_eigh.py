"""The symmetric eigendecomposition on the chip by two-sided Jacobi: each step rotates n/2
disjoint index pairs (p, q) at once, A <- J^T A J with the rotation zeroing every a_pq (Golub
and Van Loan's symmetric Schur pair), in the round-robin order of vtpu/linalg_svd.py, for the
same fixed number of sweeps; the eigenvectors are then the product of the rotations and the
eigenvalues their Rayleigh quotients v^T A v with the input (the rotated diagonal collects a
rounding at every rotation). A pair already zero to f32 precision (|a_pq| at most eps times
sqrt(|a_pp a_qq|)) gets the identity, exactly. As LAPACK, only the triangle UPLO names is read;
the eigenvalues come in ascending order. The eigenvectors' signs (and the basis of a repeated
eigenvalue's space) are the algorithm's, not LAPACK's, as between any two backends.

Registered at PrivateUse1 for _linalg_eigh, so eigh, eigvalsh, and the hermitian forms of pinv
and matrix_rank (vtpu/linalg_pseudoinverse.py) run on the chip, and torch's derivative formula
too. Orders above linalg_svd.MAX_COLUMNS fall back, named.
"""
from __future__ import annotations

import torch

from . import linalg_svd
from .composed_fallback import run_on_cpu
from .python_kernels import register


def _symmetric(a, upper):
    """The symmetric matrix a's `upper` (or lower) triangle defines."""
    triangle = a.triu() if upper else a.tril()
    return triangle + (a.triu(1) if upper else a.tril(-1)).mT


def _rotation(a, order, n):
    """(c, s) as [..., 1, pairs] of the rotations zeroing a_pq for the step's pairs."""
    half = n // 2
    first, second = order[:half], order[half:]
    diagonal = a.diagonal(dim1=-2, dim2=-1)
    a_pp, a_qq = diagonal.index_select(-1, first), diagonal.index_select(-1, second)
    a_pq = a.flatten(-2).index_select(-1, first * n + second)
    tau = (a_qq - a_pp) / (2 * a_pq)
    t = torch.where(tau >= 0, 1.0, -1.0) / (tau.abs() + torch.sqrt(1 + tau * tau))
    t = torch.where(a_pq.abs() <= torch.finfo(a.dtype).eps * (a_pp * a_qq).abs().sqrt(), 0.0, t)
    c = torch.rsqrt(1 + t * t)
    return c.unsqueeze(-2), (c * t).unsqueeze(-2)


def _jacobi(a):
    """(eigenvalues in A's diagonal order, eigenvectors as columns) of a symmetric a."""
    n = a.shape[-1]
    padded = n + n % 2
    if padded != n:  # a zero row and column: no rotation ever involves them
        a = torch.nn.functional.pad(a, (0, 1, 0, 1))
    v = torch.eye(padded, dtype=a.dtype, device=a.device).expand(*a.shape[:-2], padded, padded).contiguous()
    orders, backs = linalg_svd._schedule(padded, a.device)
    for _ in range(linalg_svd.SWEEPS):
        for step in range(padded - 1):
            order, back = orders[step], backs[step]
            c, s = _rotation(a, order, padded)
            a = linalg_svd._rotate(linalg_svd._rotate(a, c, s, order, back).mT, c, s, order, back).mT
            v = linalg_svd._rotate(v, c, s, order, back)
    return a.diagonal(dim1=-2, dim2=-1)[..., :n], v[..., :n, :n]


def linalg_eigh(a, UPLO="L", compute_v=True):
    n = a.shape[-1]
    if n > linalg_svd.MAX_COLUMNS:
        return run_on_cpu("_linalg_eigh", f"matrices of order {n} (above {linalg_svd.MAX_COLUMNS}; n - 1 Jacobi steps per sweep)",
                          a, UPLO, compute_v)
    if n == 0:
        return a.new_zeros(a.shape[:-1]), a.clone() if compute_v else a.new_empty(0)
    symmetric = _symmetric(a, UPLO == "U")
    _, vectors = _jacobi(symmetric)
    vectors = vectors / torch.linalg.vector_norm(vectors, dim=-2, keepdim=True)
    # Rayleigh quotients v^T A v of the final vectors: second order in their error, where the
    # rotated diagonal collects a rounding at every rotation
    values, order = ((symmetric @ vectors) * vectors).sum(-2).sort(-1)
    if not compute_v:
        return values, a.new_empty(0)
    return values, vectors.gather(-1, order.unsqueeze(-2).expand_as(vectors))


register("_linalg_eigh", linalg_eigh, "PrivateUse1")
