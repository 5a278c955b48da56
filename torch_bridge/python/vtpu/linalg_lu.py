"""LU factorization with partial pivoting on the chip and what is built on it: linalg_lu_factor_ex,
lu_unpack, linalg_lu, linalg_lu_solve, linalg_solve, linalg_inv, det and slogdet. Composed of
lowered ops one column at a time, as LAPACK's getf2 does (the pivot is the first largest
magnitude in the column, rows are swapped by a gather, pivots are 1-based int32 row
interchanges, info is the first zero pivot's order), so results, pivots included, are the CPU's.
Registered at PrivateUse1: torch's derivative formulas run on the chip too. Matrices above
linalg_triangular.MAX_ORDER fall back, named.
"""
from __future__ import annotations

import torch

from .linalg_triangular import MAX_ORDER, _too_large, solve_lower_or_upper
from .python_kernels import register


def _swap(index, j, p):
    """index with entries j and p (p a tensor of per-matrix positions, of index's dtype) exchanged."""
    positions = torch.arange(index.shape[-1], dtype=index.dtype, device=index.device)
    p = p.unsqueeze(-1)
    at_j, at_p = index[..., j:j + 1], index.gather(-1, p.long())
    return torch.where(positions == j, at_p, torch.where(positions == p, at_j, index))


def lu_factor(a, pivot=True):
    """(LU, pivots, info) as LAPACK's getrf returns them."""
    m, n = a.shape[-2:]
    k = min(m, n)
    lu = a.clone()
    if a.numel() == 0:  # nothing to factor (and no empty gathers on the chip)
        return lu, torch.zeros(*a.shape[:-2], k, dtype=torch.int32, device=a.device), \
            torch.zeros(a.shape[:-2], dtype=torch.int32, device=a.device)
    rows = torch.arange(m, device=a.device).expand(*a.shape[:-1])
    pivots, zero_pivots = [], []
    for j in range(k):
        if pivot:
            p = j + lu[..., j:, j].abs().argmax(-1)
            lu = lu.gather(-2, _swap(rows, j, p).unsqueeze(-1).expand(lu.shape))
        else:
            p = torch.full(a.shape[:-2], j, dtype=torch.long, device=a.device)
        pivots.append((p + 1).to(torch.int32))  # int32 throughout: the chip stacks it (not int64)
        value = lu[..., j, j]
        zero = value == 0
        zero_pivots.append(zero)
        if j + 1 < m:
            below = lu[..., j + 1:, j]
            below = torch.where(zero.unsqueeze(-1), below, below / value.unsqueeze(-1))  # LAPACK skips a zero pivot
            lu[..., j + 1:, j] = below
            if j + 1 < n:
                lu[..., j + 1:, j + 1:] -= below.unsqueeze(-1) * lu[..., j, j + 1:].unsqueeze(-2)
    zeros = torch.stack(zero_pivots, -1)
    info = torch.where(zeros.any(-1), zeros.to(a.dtype).argmax(-1) + 1, 0).to(torch.int32)
    return lu, torch.stack(pivots, -1), info


def permutation(pivots, m):
    """perm (int32) with (P^T A)[i] = A[perm[i]]: the row interchanges applied in order. int32 keeps
    the arithmetic on the chip (int64 of unknown magnitude would not)."""
    perm = torch.arange(m, dtype=torch.int32, device=pivots.device).expand(*pivots.shape[:-1], m)
    for j in range(pivots.shape[-1]):
        perm = _swap(perm, j, (pivots[..., j] - 1).contiguous())
    return perm


def _inverse_permutation(perm):
    positions = torch.arange(perm.shape[-1], dtype=perm.dtype, device=perm.device)
    return (perm.unsqueeze(-2) == positions.unsqueeze(-1)).to(torch.float32).argmax(-1)


def _permutation_sign(pivots, dtype):
    positions = torch.arange(1, pivots.shape[-1] + 1, dtype=torch.int32, device=pivots.device)
    swaps = (pivots != positions).to(dtype).sum(-1)
    return 1 - 2 * (swaps - 2 * (swaps / 2).floor())


def lu_unpack(lu, pivots, unpack_data=True, unpack_pivots=True):
    m, n = lu.shape[-2:]
    k = min(m, n)
    empty = lu.new_empty(0)
    lower = upper = p = empty
    if unpack_data:
        lower = lu[..., :, :k].tril(-1) + torch.eye(m, k, dtype=lu.dtype, device=lu.device)
        upper = lu[..., :k, :].triu()
    if unpack_pivots and lu.numel() == 0:
        p = torch.zeros(*lu.shape[:-2], m, m, dtype=lu.dtype, device=lu.device) + torch.eye(m, dtype=lu.dtype,
                                                                                             device=lu.device)
    elif unpack_pivots:
        perm = permutation(pivots, m)
        p = (torch.arange(m, dtype=torch.int32, device=lu.device).unsqueeze(-1) == perm.unsqueeze(-2)).to(lu.dtype)
    return p, lower, upper


def lu_solve(lu, pivots, b, left=True, adjoint=False):
    """X with A X = b (A^T X = b when adjoint; X A = b when not left), A = P L U."""
    if not left:
        return lu_solve(lu, pivots, b.mT, True, not adjoint).mT
    batch = torch.broadcast_shapes(lu.shape[:-2], b.shape[:-2])
    lu = lu.expand(*batch, *lu.shape[-2:])
    b = b.expand(*batch, *b.shape[-2:])
    if b.numel() == 0 or lu.numel() == 0:
        return torch.zeros(b.shape, dtype=torch.result_type(lu, b), device=b.device)
    perm = permutation(pivots.expand(*batch, pivots.shape[-1]).contiguous(), lu.shape[-1])
    if not adjoint:  # X = U^-1 L^-1 P^T b
        permuted = b.gather(-2, perm.long().unsqueeze(-1).expand(b.shape))
        return solve_lower_or_upper(lu, solve_lower_or_upper(lu, permuted, False, True), True, False)
    z = solve_lower_or_upper(lu.mT, solve_lower_or_upper(lu.mT, b, False, False), True, True)  # (L^T)^-1 (U^T)^-1 b
    return z.gather(-2, _inverse_permutation(perm).unsqueeze(-1).expand(z.shape))  # P z


def _square_order(a):
    return a.shape[-1] if a.dim() >= 2 else 0


def linalg_lu_factor_ex(a, pivot=True, check_errors=False):
    if max(a.shape[-2:]) > MAX_ORDER:
        return _too_large("linalg_lu_factor_ex", max(a.shape[-2:]), a, pivot, check_errors)
    return lu_factor(a, pivot)


def linalg_lu(a, pivot=True):
    if max(a.shape[-2:]) > MAX_ORDER:
        return _too_large("linalg_lu", max(a.shape[-2:]), a, pivot)
    lu, pivots, _ = lu_factor(a, pivot)
    return lu_unpack(lu, pivots, True, pivot)


def linalg_lu_solve(lu, pivots, b, *, left=True, adjoint=False):
    if lu.shape[-1] > MAX_ORDER:
        return _too_large("linalg_lu_solve", lu.shape[-1], lu, pivots, b, left=left, adjoint=adjoint)
    return lu_solve(lu, pivots, b, left, adjoint)


def _factor_for_det(a):
    """(LU, pivots): the factorization torch's det and slogdet derivative formulas expect back: of
    a^T when a is contiguous (the CPU's kernel factors the F-contiguous a^T to save a copy, and the
    formulas solve with adjoint accordingly), else of a. solve's formula expects a's own (checked
    against the CPU's gradients in tests/python/test_linalg.py)."""
    transposed = a.is_contiguous() and not a.is_complex()
    return lu_factor(a.mT if transposed else a)[:2]


def linalg_solve_ex(a, b, *, left=True, check_errors=False):
    """(X, LU, pivots, info); b may be a vector (or a batch of them), as torch.linalg.solve allows."""
    if a.shape[-1] > MAX_ORDER:
        return _too_large("_linalg_solve_ex", a.shape[-1], a, b, left=left, check_errors=check_errors)
    vector = b.dim() == 1 or (b.dim() == a.dim() - 1 and b.shape == a.shape[:-1])
    lu, pivots, info = lu_factor(a)
    x = lu_solve(lu, pivots, b.unsqueeze(-1) if vector else b, left)
    return (x.squeeze(-1) if vector else x), lu, pivots, info


def linalg_inv_ex(a, *, check_errors=False):
    n = a.shape[-1]
    if n > MAX_ORDER:
        return _too_large("linalg_inv_ex", n, a, check_errors=check_errors)
    lu, pivots, info = lu_factor(a)
    return lu_solve(lu, pivots, torch.eye(n, dtype=a.dtype, device=a.device)), info


def linalg_det(a):
    if a.shape[-1] > MAX_ORDER:
        return _too_large("_linalg_det", a.shape[-1], a)
    lu, pivots = _factor_for_det(a)  # det(a^T) = det(a)
    return lu.diagonal(0, -2, -1).prod(-1) * _permutation_sign(pivots, a.dtype), lu, pivots


def linalg_slogdet(a):
    if a.shape[-1] > MAX_ORDER:
        return _too_large("_linalg_slogdet", a.shape[-1], a)
    lu, pivots = _factor_for_det(a)
    diagonal = lu.diagonal(0, -2, -1)
    sign = diagonal.sign().prod(-1) * _permutation_sign(pivots, a.dtype)
    return sign, diagonal.abs().log().sum(-1), lu, pivots


for _name, _fn in {"linalg_lu_factor_ex": linalg_lu_factor_ex, "linalg_lu": linalg_lu, "lu_unpack": lu_unpack,
                   "linalg_lu_solve": linalg_lu_solve, "_linalg_solve_ex": linalg_solve_ex,
                   "linalg_inv_ex": linalg_inv_ex, "_linalg_det": linalg_det, "_linalg_slogdet": linalg_slogdet}.items():
    register(_name, _fn, "PrivateUse1")
