"""torch.linalg.lstsq on the chip, per LAPACK driver, from the factorisations vtpu composes:
- gels (full-rank inputs, no rank estimate): LAPACK's own method, the Householder QR of A
  (vtpu/linalg_qr.py) and a triangular solve, x = R^-1 Q^T b for m >= n; for m < n the QR of A^T
  (LAPACK's LQ of A), the minimum-norm x = Q R^-T b.
- gelsy, gelsd, gelss: the minimum-norm solution through the SVD (vtpu/linalg_svd.py), singular
  values at most rcond times the largest dropped (rcond defaults to eps * max(m, n)); the rank is
  the count kept, and gelsd and gelss also return the singular values. LAPACK's gelsy takes the
  rank from a pivoted QR instead (the largest leading block of R whose condition estimate stays
  below 1 / rcond): the two agree where the singular values stand clear of the cutoff, as a
  rank-deficient matrix's zeros do at the default rcond, and can differ at a coarse rcond.
Residuals, for m > n and drivers other than gelsy (gelsd and gelss: only when every matrix has
full rank, a count read back, as on the CPU), are squared norms of the right-hand side's part
outside A's column space, (Q^T b)[n:] from the complete QR, as LAPACK leaves them. Registered at
PrivateUse1, so torch's lstsq gradient (through pinv) runs on the chip too. Empty matrices fall
back, named.
"""
from __future__ import annotations

import torch

from .composed_fallback import run_on_cpu
from .python_kernels import register


def _qr_solution(a, b):
    m, n = a.shape[-2:]
    if m >= n:
        q, r = torch.linalg.qr(a)
        return torch.linalg.solve_triangular(r, q.mT @ b, upper=True)
    q, r = torch.linalg.qr(a.mT)
    return q @ torch.linalg.solve_triangular(r.mT, b, upper=False)


def _svd_solution(a, b, rcond):
    m, n = a.shape[-2:]
    u, s, vh = torch.linalg.svd(a, full_matrices=False)
    cutoff = (torch.finfo(a.dtype).eps * max(m, n) if rcond is None else rcond) * s[..., :1]
    kept = s > cutoff
    inverse = torch.where(kept, s.reciprocal(), 0.0)
    return vh.mT @ (inverse.unsqueeze(-1) * (u.mT @ b)), kept.sum(-1), s


def linalg_lstsq(a, b, rcond=None, *, driver=None):
    driver = driver or "gelsy"
    torch._check(a.dim() >= 2, lambda: "torch.linalg.lstsq: input must have at least 2 dimensions.")
    torch._check(b.dim() >= 1, lambda: "torch.linalg.lstsq: other must have at least 1 dimension.")
    m, n = a.shape[-2:]
    if a.numel() == 0 or b.numel() == 0:
        return run_on_cpu("linalg_lstsq", "empty matrices", a, b, rcond, driver=driver)
    vector = b.dim() == 1 or (b.dim() == a.dim() - 1 and b.shape == a.shape[:-1])
    rhs = b.unsqueeze(-1) if vector else b
    batch = torch.broadcast_shapes(a.shape[:-2], rhs.shape[:-2])
    a, rhs = a.expand(*batch, m, n), rhs.expand(*batch, m, rhs.shape[-1])
    no_rank, no_values = torch.empty(0, dtype=torch.long, device=a.device), a.new_empty(0)
    if driver == "gels":
        solution, rank, values = _qr_solution(a, rhs), no_rank, no_values
    else:
        solution, rank, s = _svd_solution(a, rhs, rcond)
        values = s if driver in ("gelsd", "gelss") else no_values
    residuals = a.new_empty(0)
    wanted = m > n and driver != "gelsy"
    # gelsd/gelss: only where every matrix has full rank, read back (a sync point, as on the CPU)
    if wanted and (driver == "gels" or bool((rank == n).all().item())):
        outside = torch.linalg.qr(a, mode="complete")[0][..., n:].mT @ rhs
        residuals = (outside * outside).sum(-2)
    return solution.squeeze(-1) if vector else solution, residuals, rank, values


register("linalg_lstsq", linalg_lstsq, "PrivateUse1")
