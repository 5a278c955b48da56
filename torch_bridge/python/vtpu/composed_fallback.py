"""The CPU fallback for ops vtpu composes in Python (embedding_bag, pooling_3d, bincount, ...)
when a call needs what the composition does not cover (float64, for those computing in f32):
allowed only where the user allowed the fallback, warned once per op and counted like the C++
fallback. The inputs go to the CPU and the results come back by differentiable copies, so
gradients still flow.
"""
from __future__ import annotations

import warnings

import torch
from torch.utils._pytree import tree_leaves, tree_map

from . import _C
from .meta_check import raise_if_torch_rejects


def run_on_cpu(op, why: str, *args, **kwargs):
    """aten `op` (a name, "name.overload", or an OpOverload) on the CPU with tensors (also inside
    lists) moved there."""
    name = op if isinstance(op, str) else op._schema.name.split("::")[-1]
    if isinstance(op, str):
        packet, _, overload = op.partition(".")
        function = getattr(torch.ops.aten, packet)
        function = getattr(function, overload) if overload else function
    else:
        function = op
    if not _C.cpu_fallback_allowed():
        raise_if_torch_rejects(function, *args, **kwargs)  # bad input: torch's own error
        raise NotImplementedError(f"vtpu: aten::{name} cannot run on the chip: {why}. Set VTPU_CPU_FALLBACK=1 (or "
                                  "vtpu.set_cpu_fallback(True)) to run it on the CPU.")
    if _C.count_cpu_fallback(f"aten::{name}"):
        warnings.warn(f"vtpu: aten::{name} runs on the CPU ({why}); counted in vtpu.stats()", stacklevel=4)
    device = next(t.device for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor) and t.device.type != "cpu")
    cpu = tree_map(lambda t: t.cpu() if isinstance(t, torch.Tensor) else t, (args, kwargs))
    result = function(*cpu[0], **cpu[1])
    return tree_map(lambda t: t.to(device) if isinstance(t, torch.Tensor) else t, result)


def float64_on_cpu(op, *args):
    """A composition that computes in f32, given float64 inputs: the CPU, named, rather than
    results of f32 precision in a float64 tensor (the chip has no float64 arithmetic)."""
    return run_on_cpu(op, "float64 inputs (the chip has no float64 arithmetic)", *args)
