"""linalg.pinv and linalg.matrix_rank on the chip, from the singular values of vtpu/linalg_svd.py.
torch computes their tolerances (max(atol, rtol * the largest singular value), rtol defaulting
to eps * max(m, n) where no atol is given) as float64 tensors, and the chip has no float64
arithmetic: here they are in the input's dtype, the same comparison up to the rounding of the
tolerance itself. The hermitian forms take the eigenvalues' magnitudes as the singular values
(vtpu/linalg_eigh.py). pinv is registered at PrivateUse1, so autograd uses torch's pinv_backward (matmuls
on the chip); matrix_rank (an integer result) at the autograd key.
"""
from __future__ import annotations

import torch

from .python_kernels import register


def _tolerances(a, atol, rtol):
    """torch's get_atol_rtol, as tensors of a's dtype on a's device."""
    as_input = lambda t: t.to(a.device, a.dtype)  # noqa: E731  (a float64 tolerance is cast, not computed with)
    default = torch.finfo(a.dtype).eps * max(a.shape[-1], a.shape[-2])
    atol_t = a.new_zeros(()) if atol is None else as_input(atol)
    if rtol is not None:
        return atol_t, as_input(rtol)
    if atol is None:
        return atol_t, a.new_full((), default)
    return atol_t, torch.where(atol_t > 0, 0.0, default).to(a.dtype)


def _threshold(atol, rtol, largest):
    return torch.maximum(atol.unsqueeze(-1), rtol.unsqueeze(-1) * largest)


def linalg_pinv(a, atol=None, rtol=None, hermitian=False):
    atol, rtol = _tolerances(a, atol, rtol)
    if a.numel() == 0:
        return a.new_zeros(*a.shape[:-2], a.shape[-1], a.shape[-2])
    if hermitian:  # the singular values are the eigenvalues' magnitudes
        w, u = torch.linalg.eigh(a)
        inverse = torch.where(w.abs() > _threshold(atol, rtol, w.abs().amax(-1, keepdim=True)), w.reciprocal(), 0.0)
        return (u * inverse.unsqueeze(-2)) @ u.mT
    u, s, vh = torch.linalg.svd(a, full_matrices=False)
    inverse = torch.where(s > _threshold(atol, rtol, s[..., :1]), s.reciprocal(), 0.0)
    return (vh.mT * inverse.unsqueeze(-2)) @ u.mT


def linalg_matrix_rank(a, atol=None, rtol=None, hermitian=False):
    atol, rtol = _tolerances(a, atol, rtol)
    if a.numel() == 0:
        return torch.zeros(a.shape[:-2], dtype=torch.long, device=a.device)
    s = torch.linalg.eigvalsh(a).abs() if hermitian else torch.linalg.svdvals(a)
    return (s > _threshold(atol, rtol, s.amax(-1, keepdim=True))).sum(-1)


def _matrix_rank_floats(a, atol=None, rtol=None, hermitian=False):
    as_tensor = lambda v: None if v is None else a.new_full((), v)  # noqa: E731
    return linalg_matrix_rank(a, as_tensor(atol), as_tensor(rtol), hermitian)


register("linalg_pinv.atol_rtol_tensor", linalg_pinv, "PrivateUse1")
# matrix_rank's overloads each compute the tolerances themselves (not through the dispatcher)
register("linalg_matrix_rank.atol_rtol_tensor", linalg_matrix_rank, "AutogradPrivateUse1")
register("linalg_matrix_rank.atol_rtol_float", _matrix_rank_floats, "AutogradPrivateUse1")
register("linalg_matrix_rank.tol_tensor", lambda a, tol, hermitian=False: linalg_matrix_rank(a, tol, torch.zeros_like(tol), hermitian),
         "AutogradPrivateUse1")
register("linalg_matrix_rank", lambda a, tol, hermitian=False: _matrix_rank_floats(a, tol, 0.0, hermitian), "AutogradPrivateUse1")
