"""The CPU fallback for ops vtpu composes in Python (embedding_bag, pooling_3d, bincount) when a call needs what the composition does not cover: allowed only
where the user allowed the fallback, warned once per op and counted like the C++ fallback. The
inputs go to the CPU and the results come back by differentiable copies, so gradients still flow.
"""
from __future__ import annotations

import warnings

import torch

from . import _C
from .meta_check import raise_if_torch_rejects


def run_on_cpu(op: str, why: str, *args):
    if not _C.cpu_fallback_allowed():
        raise_if_torch_rejects(getattr(torch.ops.aten, op), *args)  # bad input: torch's own error
        raise NotImplementedError(f"vtpu: aten::{op} cannot run on the chip: {why}. Set VTPU_CPU_FALLBACK=1 (or "
                                  "vtpu.set_cpu_fallback(True)) to run it on the CPU.")
    if _C.count_cpu_fallback(f"aten::{op}"):
        warnings.warn(f"vtpu: aten::{op} runs on the CPU ({why}); counted in vtpu.stats()", stacklevel=4)
    device = next(a.device for a in args if isinstance(a, torch.Tensor))
    result = getattr(torch.ops.aten, op)(*[a.cpu() if isinstance(a, torch.Tensor) else a for a in args])
    if isinstance(result, torch.Tensor):
        return result.to(device)
    return tuple(r.to(device) for r in result)
