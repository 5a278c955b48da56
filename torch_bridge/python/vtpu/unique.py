"""torch.unique (flattened) and unique_consecutive on the chip: the values sorted (a stable sort)
or kept in order, each run of equal values marked where it starts (NaN is unequal to itself, so
every NaN is its own value, as on the CPU), the runs' starts compacted by nonzero_static, each
element's run found by a cumsum of the marks, and the counts as the gaps between starts. The
number of distinct values sizes the output: it is read back, a sync point (as on CUDA). The
values come out sorted whatever `sorted` says (torch leaves that order unspecified; the CPU's
float path sorts too). unique along a dim falls back, named.
"""
from __future__ import annotations

import torch

from .composed_fallback import run_on_cpu
from .python_kernels import register


def _runs(values, return_inverse, return_counts, order=None):
    """(distinct values, inverse or empty, counts or empty) of flat `values`, whose equal values
    are adjacent; `order` maps each position back to the input's (None: the input's own)."""
    n = values.numel()
    empty_long = values.new_empty(0, dtype=torch.long)
    if n == 0:
        return values.clone(), empty_long, empty_long
    starts_run = torch.cat([values.new_ones(1, dtype=torch.bool), values[1:] != values[:-1]])
    distinct = int(starts_run.sum().item())  # the output's size: a sync point
    starts = torch.nonzero_static(starts_run, size=distinct).reshape(-1)
    inverse, counts = empty_long, empty_long
    if return_inverse:
        run = torch.cumsum(starts_run.long(), 0) - 1
        inverse = run if order is None else torch.empty_like(run).scatter_(0, order, run)
    if return_counts:
        counts = torch.diff(starts, append=starts.new_full((1,), n))
    return values.index_select(0, starts), inverse, counts


def unique2(x, sorted=True, return_inverse=False, return_counts=False):
    values, order = torch.sort(x.reshape(-1), stable=True)
    output, inverse, counts = _runs(values, return_inverse, return_counts, order)
    return output, inverse.reshape(x.shape) if return_inverse else inverse, counts


def unique(x, sorted=True, return_inverse=False):
    output, inverse, _ = unique2(x, sorted, return_inverse, False)
    return output, inverse


def unique_consecutive(x, return_inverse=False, return_counts=False, dim=None):
    if dim is not None:
        return run_on_cpu("unique_consecutive", "along a dim (rows compared whole)", x, return_inverse, return_counts, dim)
    output, inverse, counts = _runs(x.reshape(-1), return_inverse, return_counts)
    return output, inverse.reshape(x.shape) if return_inverse else inverse, counts


register("_unique2", unique2, "PrivateUse1")
register("_unique", unique, "PrivateUse1")
register("unique_consecutive", unique_consecutive, "PrivateUse1")
