"""QR on the chip by Householder reflections, as LAPACK's geqr2 computes it (so R's signs and the
reflectors are the CPU's): geqrf, linalg_householder_product (orgqr), ormqr and linalg_qr in its
three modes, one column at a time from lowered ops. Registered at PrivateUse1: torch's derivative
formulas (matmuls and triangular solves) run on the chip too. Matrices above
linalg_triangular.MAX_ORDER fall back, named.

A reflector H = I - tau v v^T with v[0] = 1 maps the column x to (beta, 0, ...): beta =
-sign(x[0]) ||x||, tau = (beta - x[0]) / beta, v = x / (x[0] - beta); a column already zero
below its head gets tau = 0 (H = I), as LAPACK's larfg.
"""
from __future__ import annotations

import torch

from .linalg_triangular import MAX_ORDER, _too_large
from .python_kernels import register


def _reflector(x):
    """(beta, tau, v below the head) of LAPACK's larfg for the columns x[..., :] (head first)."""
    alpha, rest = x[..., 0], x[..., 1:]
    rest_norm = (rest * rest).sum(-1).sqrt()
    norm = (alpha * alpha + rest_norm * rest_norm).sqrt()
    identity = rest_norm == 0
    beta = torch.where(identity, alpha, torch.where(alpha >= 0, -norm, norm))
    safe = torch.where(identity, 1.0, beta)
    tau = torch.where(identity, 0.0, (beta - alpha) / safe)
    v = torch.where(identity.unsqueeze(-1), 0.0, rest / torch.where(identity, 1.0, alpha - beta).unsqueeze(-1))
    return beta, tau, v


def _with_head(v):
    """[1, v...]: the reflector's full vector."""
    return torch.cat([torch.ones(*v.shape[:-1], 1, dtype=v.dtype, device=v.device), v], -1)


def geqrf(a):
    m, n = a.shape[-2:]
    k = min(m, n)
    out = a.clone()
    taus = []
    for j in range(k):
        beta, tau, v = _reflector(out[..., j:, j])
        taus.append(tau)
        if j + 1 < n:  # apply H to the columns on the right: C -= tau [1; v] ([1; v]^T C)
            full = _with_head(v)
            block = out[..., j:, j + 1:]
            w = (full.unsqueeze(-2) @ block).squeeze(-2)
            out[..., j:, j + 1:] = block - tau[..., None, None] * full.unsqueeze(-1) * w.unsqueeze(-2)
        out[..., j, j] = beta
        if j + 1 < m:
            out[..., j + 1:, j] = v
    tau = torch.stack(taus, -1) if taus else a.new_zeros(*a.shape[:-2], 0)
    return out, tau


def _apply_reflectors(reflectors, tau, c, left, transpose):
    """Q c, Q^T c, c Q or c Q^T for Q = H_0 H_1 ... H_{k-1} held as geqrf leaves them."""
    k = tau.shape[-1]
    order = range(k) if left == transpose else range(k - 1, -1, -1)
    for j in order:
        full = _with_head(reflectors[..., j + 1:, j])
        t = tau[..., j, None, None]
        if left:  # rows j.. of c
            block = c[..., j:, :]
            c = torch.cat([c[..., :j, :], block - t * full.unsqueeze(-1) * (full.unsqueeze(-2) @ block)], -2)
        else:  # columns j.. of c
            block = c[..., :, j:]
            c = torch.cat([c[..., :, :j], block - t * (block @ full.unsqueeze(-1)) * full.unsqueeze(-2)], -1)
    return c


def householder_product(reflectors, tau):
    """The first n columns of Q = H_0 ... H_{k-1}, built from I as LAPACK's org2r: H_j only on the
    columns from j on. The columns before j are 0 in the rows H_j touches, so the product is the
    same, but a NaN or infinite tau (a reflector of a column holding NaN) then stays out of the
    columns Q's earlier reflectors alone make (NaN * 0 is NaN), as in the CPU's Q."""
    m, n = reflectors.shape[-2:]
    q = torch.eye(m, n, dtype=reflectors.dtype, device=reflectors.device).expand(*reflectors.shape[:-2], m, n)
    for j in range(tau.shape[-1] - 1, -1, -1):
        full = _with_head(reflectors[..., j + 1:, j])
        block = q[..., j:, j:]
        block = block - tau[..., j, None, None] * full.unsqueeze(-1) * (full.unsqueeze(-2) @ block)
        q = torch.cat([q[..., :j, :], torch.cat([q[..., j:, :j], block], -1)], -2)
    return q


def geqrf_kernel(a):
    if max(a.shape[-2:]) > MAX_ORDER:
        return _too_large("geqrf", max(a.shape[-2:]), a)
    return geqrf(a)


def linalg_householder_product(reflectors, tau):
    if reflectors.shape[-2] > MAX_ORDER:
        return _too_large("linalg_householder_product", reflectors.shape[-2], reflectors, tau)
    return householder_product(reflectors, tau)


def ormqr(reflectors, tau, other, left=True, transpose=False):
    if max(other.shape[-2:]) > MAX_ORDER:
        return _too_large("ormqr", max(other.shape[-2:]), reflectors, tau, other, left, transpose)
    return _apply_reflectors(reflectors, tau, other, left, transpose)


def linalg_qr(a, mode="reduced"):
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of 'reduced' (default), 'r', or 'complete'")
    m, n = a.shape[-2:]
    if max(m, n) > MAX_ORDER:
        return _too_large("linalg_qr", max(m, n), a, mode)
    k = min(m, n)
    factored, tau = geqrf(a)
    columns = m if mode == "complete" else k
    r = factored[..., :columns, :].triu()
    if mode == "r":
        return a.new_empty(0), r
    reflectors = factored[..., :, :k]
    if columns > k:  # complete with m > n: Q is m x m, its extra reflectors are identities
        reflectors = torch.cat([reflectors, reflectors.new_zeros(*a.shape[:-2], m, columns - k)], -1)
        tau = torch.cat([tau, tau.new_zeros(*a.shape[:-2], columns - k)], -1)
    return householder_product(reflectors, tau), r


for _name, _fn in {"geqrf": geqrf_kernel, "linalg_householder_product": linalg_householder_product, "ormqr": ormqr,
                   "linalg_qr": linalg_qr}.items():
    register(_name, _fn, "PrivateUse1")
