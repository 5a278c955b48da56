"""Decompose before falling back: an aten op with no tpu lowering of its own runs as PyTorch's own
decomposition (the `torch._decomp` table, which includes `torch._refs`) into ops that are
lowered, on the chip, in every mode. The CPU fallback stays the last resort.

Each such op gets a PrivateUse1 kernel that calls the decomposition on the tpu tensors, so the
ops it emits are dispatched again (lowered, recorded for fusion, or decomposed in turn). An op
whose decomposition declines (returns NotImplemented) or reaches the same op again, directly or
through prims whose implementations call back into aten, runs on the CPU through the same
fallback path as an op with no decomposition: only where the user allowed it, warned and counted.

Ops torch already composes for every backend (CompositeExplicitAutograd, CompositeImplicitAutograd)
keep torch's kernels, and so do ops with a lowering: registration happens once, at import, after the
extension registered its lowerings.
"""
from __future__ import annotations

import threading
import warnings

import torch
from torch._ops import OpOverload
from torch.utils._pytree import tree_map

from . import _C
from .python_kernels import register as register_kernel

# Counts since the last reset_stats(), by aten op: ran as its decomposition on the chip, or on the
# CPU because its decomposition declined.
_decomposed: dict[str, int] = {}
_declined: dict[str, int] = {}
_active = threading.local()

# Keys whose kernels already serve a tpu tensor, so a decomposition must not replace them.
# (CompositeExplicitAutogradNonFunctional is not one: it serves a structured op's functional form
# by allocating and calling its out= form, which would run the decomposition and then a copy.)
_SERVED_BY = ("PrivateUse1", "CompositeExplicitAutograd", "CompositeImplicitAutograd")

# Ops whose torch decomposition is not a computation on the same device: leave them to the
# fallback (factories whose decomposition allocates on the default device, or ops that must keep
# their storage semantics).
_NEVER = {
    "aten::lift_fresh", "aten::_unsafe_view", "aten::copy_", "aten::resize_", "aten::set_",
}


# Ops torch's CPU kernel applies to a complex tensor's real and imaginary parts on their own,
# whose decompositions are written for real tensors only: a complex input runs them per part.
_PER_PART = {"aten::nan_to_num"}


def _per_part(decomposition):
    def run(a, *args, out=None, **kwargs):
        if not (isinstance(a, torch.Tensor) and a.is_complex()):
            return decomposition(a, *args, **kwargs) if out is None else decomposition(a, *args, out=out, **kwargs)
        if out is None:
            return torch.complex(decomposition(a.real, *args, **kwargs), decomposition(a.imag, *args, **kwargs))
        if out.shape != a.shape:
            out.resize_(a.shape)
        decomposition(a.real, *args, out=out.real, **kwargs)  # each part written through its view of out
        decomposition(a.imag, *args, out=out.imag, **kwargs)
        return out
    return run


def counts() -> dict:
    return {"decomposed": dict(_decomposed), "decomposition_declined": dict(_declined)}


def reset_counts() -> None:
    _decomposed.clear()
    _declined.clear()


def _label(op: OpOverload) -> str:
    name = op.name()
    return name if op._overloadname != "default" else name.split(".")[0]


def _cpu(value):
    return value.to("cpu") if isinstance(value, torch.Tensor) and value.device.type == "tpu" else value


# Why an op with a decomposition still needed the CPU.
_RECURSES = "torch's decomposition of it comes back to it"
_DECLINES = "torch's decomposition of it does not apply to these arguments"


def _cpu_fallback(op: OpOverload, args, kwargs, why: str):
    """torch's CPU fallback, as the extension's boxed fallback runs it: arguments copied to the
    host, the op run there, written arguments and results copied back to the chip."""
    label = _label(op)
    _declined[label] = _declined.get(label, 0) + 1
    if not _C.cpu_fallback_allowed():
        raise NotImplementedError(
            f"vtpu: {label} is not lowered to the chip yet ({why}). Set VTPU_CPU_FALLBACK=1 (or call "
            "vtpu.set_cpu_fallback(True)) to run it on the CPU.")
    if _C.count_cpu_fallback(label):
        warnings.warn(f"vtpu: {label} runs on the CPU ({why}); counted in vtpu.stats()", stacklevel=3)
    device = next(a.device for a in torch.utils._pytree.tree_leaves((args, kwargs))
                  if isinstance(a, torch.Tensor) and a.device.type == "tpu")
    flat_args = torch.utils._pytree.tree_leaves((args, kwargs))
    cpu_args, cpu_kwargs = tree_map(_cpu, (args, kwargs))
    result = op(*cpu_args, **cpu_kwargs)
    cpu_flat = torch.utils._pytree.tree_leaves((cpu_args, cpu_kwargs))
    written = {}
    for original, on_cpu in zip(flat_args, cpu_flat):
        if isinstance(original, torch.Tensor) and original.device.type == "tpu" and on_cpu is not original:
            if _is_written(op, original, args, kwargs):
                if original.shape != on_cpu.shape:
                    original.resize_(on_cpu.shape)
                original.copy_(on_cpu)
                written[id(on_cpu)] = original

    def back(value):
        if isinstance(value, torch.Tensor):
            return written.get(id(value), value.to(device))
        return value

    return tree_map(back, result)


def _is_written(op: OpOverload, tensor, args, kwargs) -> bool:
    for position, argument in enumerate(op._schema.arguments):
        if argument.alias_info is None or not argument.alias_info.is_write:
            continue
        value = kwargs.get(argument.name) if argument.kwarg_only or position >= len(args) else args[position]
        if value is tensor:
            return True
    return False


def _kernel(op: OpOverload, decomposition):
    label = _label(op)

    def run(*args, **kwargs):
        active = getattr(_active, "ops", None)
        if active is None:
            active = _active.ops = set()
        if op in active:  # the decomposition came back to this op: it cannot make progress on the chip
            return _cpu_fallback(op, args, kwargs, _RECURSES)
        active.add(op)
        try:
            result = decomposition(*args, **kwargs)
        except NotImplementedError:
            raise  # an op inside has no lowering and the fallback is off: its message names it
        except Exception as error:
            # Some decompositions are written for tracing and trip over eager arguments. Where the
            # user allowed the fallback the CPU decides: torch's own error for a bad call, else the
            # result. Otherwise the decomposition's error stands.
            if not _C.cpu_fallback_allowed():
                raise
            return _cpu_fallback(op, args, kwargs, f"torch's decomposition of it raised {type(error).__name__}: {error}")
        finally:
            active.discard(op)
        if result is NotImplemented:
            return _cpu_fallback(op, args, kwargs, _DECLINES)
        _decomposed[label] = _decomposed.get(label, 0) + 1
        return result

    return run


def _served(name: str) -> bool:
    if any(torch._C._dispatch_has_kernel_for_dispatch_key(name, key) for key in _SERVED_BY):
        return True
    # The view-inverse scatters' torch kernels (clone, the view, copy_) are lowered as they stand.
    return name.split(".")[0].endswith("_scatter") and torch._C._dispatch_has_kernel_for_dispatch_key(
        name, "CompositeExplicitAutogradNonFunctional")


def register() -> list[str]:
    """Gives every op in torch's decomposition table that nothing else serves on tpu a kernel that
    runs its decomposition; returns their names (sorted)."""
    from torch._decomp import decomposition_table

    registered = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns when an existing registration is overridden
        for op, decomposition in decomposition_table.items():
            if not isinstance(op, OpOverload) or op.namespace != "aten":
                continue
            name = op.name()
            if name.split(".")[0] in _NEVER or _served(name):
                continue
            if name.split(".")[0] in _PER_PART:
                decomposition = _per_part(decomposition)
            register_kernel(op, _kernel(op, decomposition), "PrivateUse1", complex_aware=True)  # torch's: any dtype
            registered.append(name)
    return sorted(registered)


decomposed_ops = register()
