"""torch's own input checks, run on meta tensors (shapes, strides and dtypes, no data) before an op
vtpu composes in Python runs, or before it says an op cannot run on the chip: a bad input then gets
the exception and message the CPU gives. torch's decompositions are written for tracing, where fake
tensors have run these checks first; run eagerly they would compute something from a bad input
instead. The C++ side does the same before its own "cannot run on the chip" (csrc/record/meta_check.h).

A meta run's verdict depends only on what the meta tensors carry, so an accepted call is
remembered by that signature: a training loop pays for the check once per shape, not per step.
"""
from __future__ import annotations

import threading
import warnings

import torch
from torch.utils._pytree import tree_map

_accepted: set = set()
_checking = threading.local()
_MAX_REMEMBERED = 4096
_PLAIN = (int, float, bool, str, type(None), torch.dtype, torch.device, torch.layout, torch.memory_format)


class _Unhashable(Exception):
    pass


def _key_of(value):
    if isinstance(value, torch.Tensor):
        if value.is_cpu and value.dim() == 0:  # a CPU scalar goes to the meta run as it is: its value counts
            return value.dtype, value.item()
        return value.shape, value.stride(), value.dtype
    if isinstance(value, (list, tuple)):
        return type(value), tuple(_key_of(v) for v in value)
    if isinstance(value, _PLAIN):
        return type(value), value
    raise _Unhashable


def _signature(op, args, kwargs):
    """What a meta run sees of a call, hashable; None when an argument has no such form."""
    try:
        return op, _key_of(args), tuple((k, _key_of(v)) for k, v in kwargs.items())
    except _Unhashable:
        return None


def _says_nothing_about_input(error: Exception) -> bool:
    """The meta kernel's own limits (they name meta tensors: no data, data-dependent shapes) and
    failures to bind the call to the schema say nothing about the input."""
    message = str(error).split("\n", 1)[0].lower()
    return "meta" in message or "failed to match any schema" in message or "expected a value of type" in message


def _wants_tensor(argument) -> bool:
    kind = argument.type
    if isinstance(kind, torch._C.OptionalType):
        kind = kind.getElementType()
    return isinstance(kind, torch._C.TensorType)


def _as_schema_wants(op, args, kwargs):
    """Python numbers where the schema takes a Tensor as tensors: torch hands a Python kernel its
    wrapped scalars (zeta(x, 2.0)'s 2.0) as numbers, which the operator itself does not take."""
    schema = getattr(op, "_schema", None)
    if schema is None:
        return args, kwargs
    arguments = schema.arguments
    number = (bool, int, float)
    args = tuple(torch.tensor(a) if i < len(arguments) and isinstance(a, number) and _wants_tensor(arguments[i]) else a
                 for i, a in enumerate(args))
    by_name = {a.name: a for a in arguments}
    kwargs = {k: torch.tensor(v) if k in by_name and isinstance(v, number) and _wants_tensor(by_name[k]) else v
              for k, v in kwargs.items()}
    return args, kwargs


def _to_meta(value):
    if isinstance(value, torch.Tensor) and not (value.is_cpu and value.dim() == 0):  # CPU scalars mix with any device
        return torch.empty_strided(value.shape, value.stride(), dtype=value.dtype, device="meta")
    if isinstance(value, torch.device) and value.type == "tpu":  # factories' device=
        return torch.device("meta")
    return value


def raise_if_torch_rejects(op, *args, **kwargs) -> None:
    """Raises what torch raises for `op(*args, **kwargs)` on meta tensors; returns when it accepts
    them or the meta run cannot tell (_says_nothing_about_input)."""
    key = _signature(op, args, kwargs)
    if (key is not None and key in _accepted) or getattr(_checking, "active", False):
        return  # (a meta run that comes back to tpu learns nothing from checking itself again)
    _checking.active = True
    try:
        _check(op, key, args, kwargs)
    finally:
        _checking.active = False


def _check(op, key, args, kwargs) -> None:
    meta_args, meta_kwargs = tree_map(_to_meta, _as_schema_wants(op, args, kwargs))
    try:
        with warnings.catch_warnings():  # the op's own run warns, once
            warnings.simplefilter("ignore")
            op(*meta_args, **meta_kwargs)
    except NotImplementedError:  # (a RuntimeError: caught first) no meta kernel: nothing learnt
        return
    except (RuntimeError, IndexError, ValueError, TypeError) as e:
        if not _says_nothing_about_input(e):
            raise
        return
    if key is not None:
        if len(_accepted) >= _MAX_REMEMBERED:
            _accepted.clear()
        _accepted.add(key)
