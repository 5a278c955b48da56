"""The singular value decomposition on the chip by one-sided Jacobi (Hestenes): column pairs of
A (m >= n; a wide A runs transposed) are rotated until every pair is orthogonal; V is then the
product of the rotations and U the rotated columns over their norms. Each step rotates n/2
disjoint pairs at once (vtpu/jacobi_sweeps.py: the round-robin order, a fixed number of sweeps),
from lowered ops: a gather of the paired columns, each pair's Gram entries as column sums, the
rotation that zeroes its inner product, and one permutation putting the columns back; an odd n
gets a zero column, which no rotation touches. The singular values are the norms of A v for the
final unit vectors v rather than the rotated columns' norms, which collect a rounding at every
rotation (bench/linalg_accuracy.py compares them with float64's and LAPACK's).

The singular values come sorted in descending order, as LAPACK's. The singular vectors are a
valid pair but not LAPACK's: each may have the other sign, and a repeated singular value may
have another basis of its space, as between any two backends. U's columns for zero singular
values, and full_matrices' extra columns, complete an orthonormal basis through a Householder
QR of U (vtpu/linalg_qr.py). Registered at PrivateUse1 for _linalg_svd, so linalg.svd,
svdvals, matrix_rank, pinv, cond and the nuclear norm run on the chip, and torch's derivative
formula (svd_backward) too. Matrices with more than jacobi_sweeps.MAX_ORDER columns after the
transpose fall back, named.
"""
from __future__ import annotations

import torch

from . import jacobi_sweeps
from .composed_fallback import run_on_cpu
from .python_kernels import register


def _rotation(first, second):
    """(c, s) of the rotations making each column pair orthogonal (Demmel and Veselic's
    formulas). A pair orthogonal to f32 precision (|gamma| at most eps times the columns' norms:
    LAPACK's gesvj test) is converged."""
    alpha, beta = (first * first).sum(-2), (second * second).sum(-2)
    gamma = (first * second).sum(-2)
    zeta = (beta - alpha) / (2 * gamma)
    t = torch.where(zeta >= 0, 1.0, -1.0) / (zeta.abs() + torch.sqrt(1 + zeta * zeta))
    return jacobi_sweeps.identity_if(gamma.abs() <= torch.finfo(first.dtype).eps * (alpha * beta).sqrt(), t)


def _jacobi(a):
    """(A V, V) for a tall a [..., m, n] with A V's columns mutually orthogonal."""
    n = a.shape[-1]
    padded = n + n % 2
    if padded != n:
        a = torch.cat([a, a.new_zeros(*a.shape[:-1], 1)], -1)
    v = torch.eye(padded, dtype=a.dtype, device=a.device).expand(*a.shape[:-2], padded, padded).contiguous()
    for order, back in jacobi_sweeps.steps(padded, a.device):
        c, s = _rotation(*jacobi_sweeps.halves(a, order))
        a, v = jacobi_sweeps.rotate(a, c, s, order, back), jacobi_sweeps.rotate(v, c, s, order, back)
    return a[..., :n], v[..., :n, :n]


def _orthonormal_completion(u, keep, columns):
    """`columns` orthonormal columns: u's where `keep` ([..., n]), elsewhere and beyond n the
    ones a complete Householder QR of u adds (orthogonal to every column it keeps)."""
    q = torch.linalg.qr(u, mode="complete")[0]
    n = u.shape[-1]
    kept = torch.where(keep.unsqueeze(-2), u, q[..., :n])
    return torch.cat([kept, q[..., n:columns]], -1) if columns > n else kept


def _tall_svd(a, full_matrices, compute_uv):
    m, n = a.shape[-2:]
    rotated, v = _jacobi(a)
    v = v / torch.linalg.vector_norm(v, dim=-2, keepdim=True)
    # The rotated columns collect a rounding at every rotation (their norms drift 1e-5 from the
    # singular values at 128 columns); the input times the final vectors, one product, gives the
    # singular values to its own rounding: second order in the vectors' error.
    s, order = torch.linalg.vector_norm(a @ v, dim=-2).sort(-1, descending=True)
    if not compute_uv:
        return None, s, None
    gather = order.unsqueeze(-2)
    rotated = rotated.gather(-1, gather.expand(*rotated.shape[:-1], n))
    v = v.gather(-1, gather.expand(*v.shape[:-1], n))
    lengths = torch.linalg.vector_norm(rotated, dim=-2)
    nonzero = lengths > 0
    u = torch.where(nonzero.unsqueeze(-2), rotated / torch.where(nonzero, lengths, 1.0).unsqueeze(-2), 0.0)
    u = _orthonormal_completion(u, nonzero, m if full_matrices else n)
    return u, s, v.mT


def linalg_svd(a, full_matrices=False, compute_uv=True, *, driver=None):
    m, n = a.shape[-2:]
    k = min(m, n)
    if k > jacobi_sweeps.MAX_ORDER:
        return run_on_cpu("_linalg_svd", f"matrices of {k} columns (above {jacobi_sweeps.MAX_ORDER}; n - 1 Jacobi steps per sweep)",
                          a, full_matrices, compute_uv, driver=driver)
    batch = a.shape[:-2]
    if k == 0:  # nothing to decompose: identities where full_matrices asks for square factors
        eye = lambda size, other: torch.eye(size, dtype=a.dtype, device=a.device)[:, : size if full_matrices else other]  # noqa: E731
        s = a.new_zeros(*batch, 0)
        if not compute_uv:
            return a.new_empty(0), s, a.new_empty(0)
        return eye(m, 0).expand(*batch, m, -1).contiguous(), s, eye(n, 0).mT.expand(*batch, -1, n).contiguous()
    wide = m < n
    u, s, vh = _tall_svd(a.mT if wide else a, full_matrices, compute_uv)
    if not compute_uv:
        return a.new_empty(0), s, a.new_empty(0)
    if wide:  # A^T = U S V^T (U completed to n columns under full_matrices), so A = V S U^T
        u, vh = vh.mT, u.mT
    return u, s, vh


register("_linalg_svd", linalg_svd, "PrivateUse1")
