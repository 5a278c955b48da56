"""torch.triu_indices and torch.tril_indices on the chip: the coordinates of a [row, col] mask's
true elements (column minus row at least, or at most, the offset), compacted by nonzero_static,
which needs no synchronisation since the count is known from the sizes alone. torch's own
decomposition computes them in float64 (a square root per element), which the chip has not.
"""
from __future__ import annotations

import torch
from torch._refs import _get_tril_sizes, _get_triu_sizes

from .python_kernels import register


def _coordinates(row, col, offset, upper, dtype, device):
    trapezoid, rectangle, _ = (_get_triu_sizes if upper else _get_tril_sizes)(row, col, offset)
    diagonal = torch.arange(col, device=device).unsqueeze(0) - torch.arange(row, device=device).unsqueeze(1)
    mask = diagonal >= offset if upper else diagonal <= offset
    return torch.nonzero_static(mask, size=trapezoid + rectangle).t().to(dtype).contiguous()


def triu_indices(row, col, offset=0, *, dtype=torch.long, layout=None, device=None, pin_memory=None):
    return _coordinates(row, col, offset, True, dtype or torch.long, device)


def tril_indices(row, col, offset=0, *, dtype=torch.long, layout=None, device=None, pin_memory=None):
    return _coordinates(row, col, offset, False, dtype or torch.long, device)


register("triu_indices", triu_indices, "PrivateUse1")
register("tril_indices", tril_indices, "PrivateUse1")
