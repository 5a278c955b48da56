"""Cholesky factorization and triangular solves on the chip, composed of lowered ops one column
(or row) at a time, as XLA's TPU lowering builds them from matmuls and elementwise steps:
linalg_cholesky_ex (and the legacy cholesky), linalg_solve_triangular, triangular_solve,
cholesky_solve and cholesky_inverse, batched and broadcast as the CPU's. Registered at
PrivateUse1, so torch's derivative formulas (themselves triangular solves and matmuls) run on the
chip too. Each step is a few small kernels, so matrices above MAX_ORDER fall back, named, rather
than launch thousands of them.

A Cholesky that meets a non-positive (or NaN) pivot reports it in `info` (the first such order,
as LAPACK's), and torch.linalg.cholesky raises the CPU's error from it. The factor then holds what
LAPACK's column-by-column factorization leaves: the columns before that pivot factored, the
pivot's own value (before the square root) in its place, and the input's triangle from there on.
With upper=True the input's upper triangle is the one read, as LAPACK's 'U'.
"""
from __future__ import annotations

import torch

from .composed_fallback import run_on_cpu
from .python_kernels import register


MAX_ORDER = 512


def _too_large(op: str, n: int, *args):
    return run_on_cpu(op, f"matrices of order {n} (above {MAX_ORDER}, one step per column)", *args)


def cholesky_lower(a):
    """(L, info): L L^T = a, column by column; info is the first order whose pivot is not positive."""
    n = a.shape[-1]
    factor = torch.zeros_like(a)
    if a.numel() == 0:
        return factor, torch.zeros(a.shape[:-2], dtype=torch.int32, device=a.device)
    pivots = []
    for j in range(n):
        row = factor[..., j, :j]
        pivot = a[..., j, j] - (row * row).sum(-1) if j else a[..., j, j]
        pivots.append(pivot)
        diagonal = pivot.sqrt()
        factor[..., j, j] = diagonal
        if j + 1 < n:
            below = a[..., j + 1:, j]
            if j:
                below = below - (factor[..., j + 1:, :j] @ row.unsqueeze(-1)).squeeze(-1)
            factor[..., j + 1:, j] = below / diagonal.unsqueeze(-1)
    pivots = torch.stack(pivots, -1)
    failed = ~(pivots > 0)
    first = torch.where(failed.any(-1), failed.to(a.dtype).argmax(-1), n)  # the first failed order, n if none
    info = torch.where(first < n, first + 1, 0).to(torch.int32)
    column = torch.arange(n, device=a.device)
    factored = column < first[..., None, None]
    at_pivot = (column[:, None] == column) & (column == first[..., None, None])
    factor = torch.where(factored, factor, torch.where(at_pivot, torch.diag_embed(pivots), torch.tril(a)))
    return factor, info


def solve_lower_or_upper(a, b, upper: bool, unitriangular: bool):
    """X with a X = b for triangular a, row by row (from the last row when upper); batch dims broadcast."""
    batch = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    n = a.shape[-1]
    a = a.expand(*batch, n, n)
    b = b.expand(*batch, *b.shape[-2:])
    x = torch.zeros(*batch, *b.shape[-2:], dtype=torch.result_type(a, b), device=a.device)
    if x.numel() == 0:
        return x
    rows = range(n - 1, -1, -1) if upper else range(n)
    for i in rows:
        done = slice(i + 1, n) if upper else slice(0, i)
        value = b[..., i, :]
        if (n - i - 1 if upper else i) > 0:
            value = value - (a[..., i, done].unsqueeze(-2) @ x[..., done, :]).squeeze(-2)
        x[..., i, :] = value if unitriangular else value / a[..., i, i].unsqueeze(-1)
    return x


def solve_triangular(a, b, *, upper: bool, left: bool = True, unitriangular: bool = False):
    if left:
        return solve_lower_or_upper(a, b, upper, unitriangular)
    return solve_lower_or_upper(a.mT, b.mT, not upper, unitriangular).mT  # X a = b  <=>  a^T X^T = b^T


def linalg_cholesky_ex(a, upper=False, check_errors=False):
    if a.shape[-1] > MAX_ORDER:
        return _too_large("linalg_cholesky_ex", a.shape[-1], a, upper, check_errors)
    factor, info = cholesky_lower(a.mT if upper else a)  # LAPACK reads the triangle it returns
    if check_errors and bool((info > 0).any()):
        raise torch.linalg.LinAlgError("linalg.cholesky: The factorization could not be completed because the input is "
                                       "not positive-definite.")
    return (factor.mT.contiguous() if upper else factor), info


def cholesky(a, upper=False):
    return linalg_cholesky_ex(a, upper, True)[0]


def linalg_solve_triangular(a, b, *, upper, left=True, unitriangular=False):
    if a.shape[-1] > MAX_ORDER:
        return _too_large("linalg_solve_triangular", a.shape[-1], a, b, upper=upper, left=left,
                          unitriangular=unitriangular)
    return solve_triangular(a, b, upper=upper, left=left, unitriangular=unitriangular)


def triangular_solve(b, a, upper=True, transpose=False, unitriangular=False):
    """The legacy form: (X with op(a) X = b, a broadcast and cloned)."""
    if a.shape[-1] > MAX_ORDER:
        return _too_large("triangular_solve", a.shape[-1], b, a, upper, transpose, unitriangular)
    batch = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    coefficient = a.mT if transpose else a
    x = solve_lower_or_upper(coefficient, b, upper != transpose, unitriangular)
    return x, a.expand(*batch, *a.shape[-2:]).clone()


def cholesky_solve_helper(b, factor, upper):
    """X with (L L^T) X = b, from L (or U with U^T U, when upper)."""
    if factor.shape[-1] > MAX_ORDER:
        return _too_large("_cholesky_solve_helper", factor.shape[-1], b, factor, upper)
    lower = factor.mT if upper else factor
    return solve_lower_or_upper(lower.mT, solve_lower_or_upper(lower, b, False, False), True, False)


def cholesky_inverse(factor, upper=False):
    """(L L^T)^-1 = L^-T L^-1 from L (or U^-1 U^-T from U, when upper)."""
    n = factor.shape[-1]
    if n > MAX_ORDER:
        return _too_large("cholesky_inverse", n, factor, upper)
    identity = torch.eye(n, dtype=factor.dtype, device=factor.device)
    inverse = solve_lower_or_upper(factor, identity, upper, False)
    return inverse @ inverse.mT if upper else inverse.mT @ inverse


for _name, _fn in {"linalg_cholesky_ex": linalg_cholesky_ex, "cholesky": cholesky,
                   "linalg_solve_triangular": linalg_solve_triangular, "triangular_solve": triangular_solve,
                   "_cholesky_solve_helper": cholesky_solve_helper, "cholesky_inverse": cholesky_inverse}.items():
    register(_name, _fn, "PrivateUse1")
