"""torch.mode on the chip, as the CPU's kernel (TensorCompareKernel.cpp, mode_kernel_impl) picks it.

The CPU sorts each slice's (value, index) pairs by value and walks the runs of equal values: the
mode is the first longest run (among equally frequent values the smallest), its index the index
held by the run's last pair. Its std::sort is an insertion sort up to 16 elements, so there the
last pair is the value's last occurrence; on longer slices the introsort's order of equal pairs
is its own, and any occurrence of the mode is what the CPU may return. Here a stable sort orders
the slice, a running maximum of run starts gives each run's length at its end, and the first
longest run's end gives the value and (the stable order keeping occurrences in place) the last
occurrence's index.
"""
from __future__ import annotations

import torch

from .python_kernels import register


def mode(x, dim: int = -1, keepdim: bool = False):
    if x.dim() == 0:
        return x.clone(), torch.zeros((), dtype=torch.int64, device=x.device)
    dim = dim % x.dim()
    values, order = torch.sort(x, dim=dim, stable=True)
    n = x.shape[dim]
    position = torch.arange(n, device=x.device).reshape([n if d == dim else 1 for d in range(x.dim())])
    previous, following = values.narrow(dim, 0, n - 1), values.narrow(dim, 1, n - 1)
    differs = following != previous
    first = torch.ones_like(values.narrow(dim, 0, 1), dtype=torch.bool)
    starts_run = torch.cat([first, differs], dim)
    ends_run = torch.cat([differs, first], dim)
    run_start = torch.where(starts_run, position, torch.zeros_like(position)).cummax(dim).values
    length = torch.where(ends_run, position - run_start + 1, torch.zeros_like(position))
    at = length.argmax(dim, keepdim=True)  # the first longest run: the smallest of the most frequent values
    value, index = values.gather(dim, at), order.gather(dim, at)
    if not keepdim:
        value, index = value.squeeze(dim), index.squeeze(dim)
    return value, index


register("mode", mode, "PrivateUse1")
