"""One registration path for the aten kernels vtpu writes in Python (compositions of lowered ops,
torch's decompositions): each runs after torch's own input checks on meta tensors (meta_check.py),
so a bad input gets the exception the CPU gives instead of a composition computing from it (and
the checks torch makes only in its CPU kernels, cpu_kernel_checks.py).
vtpu's compositions are written for real numbers: unless registered as complex-aware (torch's
decompositions are), a call with a complex tensor declines to the counted CPU fallback (or raises
naming the op) rather than computing a wrong answer from the real planes.
"""
from __future__ import annotations

import functools

import torch
from torch._ops import OpOverload
from torch.utils._pytree import tree_leaves

from .composed_fallback import run_on_cpu
from .cpu_kernel_checks import raise_as_torchs_cpu_kernel
from .meta_check import raise_if_torch_rejects

_library = torch.library.Library("aten", "IMPL")


def _overload(op: str | OpOverload) -> OpOverload:
    if isinstance(op, OpOverload):
        return op
    packet, _, overload = op.partition(".")
    return getattr(getattr(torch.ops.aten, packet), overload or "default")


def _has_complex(args, kwargs) -> bool:
    return any(isinstance(t, torch.Tensor) and t.is_complex() for t in tree_leaves((args, kwargs)))


def register(op: str | OpOverload, kernel, key: str = "PrivateUse1", complex_aware: bool = False) -> None:
    """`kernel` as aten `op`'s kernel for dispatch `key` ("PrivateUse1", or "AutogradPrivateUse1"
    for compositions autograd differentiates), behind torch's input checks."""
    overload = _overload(op)

    @functools.wraps(kernel)
    def checked(*args, **kwargs):
        raise_if_torch_rejects(overload, *args, **kwargs)
        raise_as_torchs_cpu_kernel(overload, args, kwargs)
        if not complex_aware and _has_complex(args, kwargs):
            return run_on_cpu(overload, "complex64 inputs (its composition on the chip is for real numbers)", *args, **kwargs)
        return kernel(*args, **kwargs)

    _library.impl(overload, checked, key)
