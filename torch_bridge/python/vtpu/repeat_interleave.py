"""torch.repeat_interleave with a tensor of repeats on the chip: element i's index repeated
repeats[i] times, as the position of each output slot among the running totals (a cumsum and a
searchsorted, both lowered). The output's length is the repeats' sum, so, as on CUDA without
`output_size`, it is read back first (a sync point), with the check that none is negative.
`x.repeat_interleave(repeats, dim)` is torch's own composition of this and index_select.
"""
from __future__ import annotations

import torch

from .cpu_kernel_checks import not_implemented_for
from .python_kernels import register



def repeat_interleave(repeats, *, output_size=None):
    # torch's checks and messages (its CPU kernel's: the meta kernel cannot check data-dependent ops)
    if repeats.dim() != 1:
        raise RuntimeError("repeat_interleave only accept 1D vector as repeat")
    if repeats.dtype not in (torch.int32, torch.int64):
        raise not_implemented_for("repeat_interleave_cpu", repeats.dtype)
    total, negative = (int(v) for v in torch.stack([repeats.sum(), (repeats < 0).sum()]).cpu())
    if negative:
        raise RuntimeError("repeats can not be negative")
    if output_size is not None and output_size != total:
        raise RuntimeError("allocated size does not match required size")
    ends = repeats.cumsum(0)
    slots = torch.arange(total, device=repeats.device, dtype=ends.dtype)
    return torch.searchsorted(ends, slots, right=True).to(repeats.dtype)


register("repeat_interleave.Tensor", repeat_interleave, "PrivateUse1")
