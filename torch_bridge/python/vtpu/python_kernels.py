"""One registration path for the aten kernels vtpu writes in Python (compositions of lowered ops,
torch's decompositions): each runs after torch's own input checks on meta tensors (meta_check.py),
so a bad input gets the exception the CPU gives instead of a composition computing from it.
"""
from __future__ import annotations

import functools

import torch
from torch._ops import OpOverload

from .meta_check import raise_if_torch_rejects

_library = torch.library.Library("aten", "IMPL")


def _overload(op: str | OpOverload) -> OpOverload:
    if isinstance(op, OpOverload):
        return op
    packet, _, overload = op.partition(".")
    return getattr(getattr(torch.ops.aten, packet), overload or "default")


def register(op: str | OpOverload, kernel, key: str = "PrivateUse1") -> None:
    """`kernel` as aten `op`'s kernel for dispatch `key` ("PrivateUse1", or "AutogradPrivateUse1"
    for compositions autograd differentiates), behind torch's input checks."""
    overload = _overload(op)

    @functools.wraps(kernel)
    def checked(*args, **kwargs):
        raise_if_torch_rejects(overload, *args, **kwargs)
        return kernel(*args, **kwargs)

    _library.impl(overload, checked, key)
