"""What moving a module to tpu needs beyond torch's Module._apply.

Lazy modules (nn.LazyLinear, nn.LazyConv2d, ...) moved to tpu before their first call: Module.to() keeps a parameter object only when torch judges the old and new tensors' impls
compatible, and torch's list of such dense backends has no PrivateUse1 (c10's
has_compatible_shallow_copy_type): moving a module to tpu builds new Parameter objects, as for
XLA tensors. For an UninitializedParameter that loses the laziness (the new Parameter holds the
0-element placeholder and the first call fails with "weight should have at least three
dimensions"), so after a module's own parameters and buffers are converted, those that were
uninitialized become uninitialized again, on the new device and dtype.

Tied parameters (embeddings shared with the LM head, T5's shared encoder/decoder embeddings): for
the same reason each module holding a shared Parameter gets a new one of its own, and the tie is
lost (gradients and optimizer updates would then differ from the CPU's). The outermost conversion
notes which slots held the same object and, afterwards, points them all at one converted object.

nn.TransformerEncoder's nested-tensor fast path: in eval mode it packs padded batches into nested
tensors, which the chip does not hold. torch declines that path for modules built where it cannot
run (use_nested_tensor = False, set in __init__); an encoder moved to tpu declines it the same way,
and its layers take the per-layer fast path (vtpu/transformer_fast_path.py) or the standard one."""
from __future__ import annotations

import threading

import torch
from torch.nn.parameter import UninitializedBuffer, UninitializedParameter

_module_apply = torch.nn.Module._apply
_converting = threading.local()  # set while the outermost conversion runs (children convert inside it)


def _shared_slots(module) -> list[list[tuple]]:
    """The (module, '_parameters' or '_buffers', name) slots of each tensor held in more than one slot."""
    slots: dict[int, list[tuple]] = {}
    for m in module.modules():
        for kind in ("_parameters", "_buffers"):
            for name, t in getattr(m, kind).items():
                if t is not None:
                    slots.setdefault(id(t), []).append((m, kind, name))
    return [group for group in slots.values() if len(group) > 1]


def _apply_for_tpu(self, fn, recurse=True):
    outermost = recurse and not getattr(_converting, "active", False)
    shared = _shared_slots(self) if outermost else []
    _converting.active = True
    try:
        result = _apply_keeping_uninitialized(self, fn, recurse)
    finally:
        if outermost:
            _converting.active = False
    for (first_module, kind, first_name), *rest in shared:  # re-tie what the conversion untied
        converted = getattr(first_module, kind)[first_name]
        for m, k, name in rest:
            getattr(m, k)[name] = converted
    return result


def _apply_keeping_uninitialized(self, fn, recurse=True):
    lazy_params = {k: p for k, p in self._parameters.items() if isinstance(p, UninitializedParameter)}
    lazy_buffers = {k: b for k, b in self._buffers.items() if isinstance(b, UninitializedBuffer)}
    result = _module_apply(self, fn, recurse)
    if isinstance(self, torch.nn.TransformerEncoder) and any(
            p.device.type == "tpu" for p in self.parameters(recurse=True)):
        self.use_nested_tensor = False
    for key, old in lazy_params.items():
        new = self._parameters[key]
        if not isinstance(new, UninitializedParameter):
            self._parameters[key] = UninitializedParameter(requires_grad=old.requires_grad, device=new.device, dtype=new.dtype)
    for key, old in lazy_buffers.items():
        new = self._buffers[key]
        if not isinstance(new, UninitializedBuffer):
            self._buffers[key] = UninitializedBuffer(requires_grad=old.requires_grad, device=new.device, dtype=new.dtype)
    return result


torch.nn.Module._apply = _apply_for_tpu
