"""Input checks torch makes inside its CPU kernels but not in their meta kernels, so asking the
meta kernel first (meta_check.py) lets these inputs through to a composition that computes from
them. Each is written as torch's CPU kernel states it, with its message; one row per op.

- Ops that read their inputs by index (cat, take, index_select) refuse an out= tensor that shares
  memory with an input at all, even all of one, and an out= tensor whose elements overlap.
- aminmax's structured kernel takes its outputs' dtype exactly: no cast into out.
- index_add requires source's shape to equal self's apart from `dim`.
- igamma and igammac take floating operands only.
"""
from __future__ import annotations

import torch
from torch._ops import OpOverload

_INTERNAL_OVERLAP = ("unsupported operation: more than one element of the written-to tensor refers to a single memory "
                     "location. Please clone() the tensor before performing the operation.")
_OVERLAP = ("unsupported operation: some elements of the input tensor and the written-to tensor refer to a single "
            "memory location. Please clone() the tensor before performing the operation.")

# torch's C++ type names, as its messages print a dtype.
_CPP_NAMES = {torch.float32: "float", torch.float64: "double", torch.float16: "c10::Half",
              torch.bfloat16: "c10::BFloat16", torch.int64: "long int", torch.int32: "int", torch.int16: "short int",
              torch.int8: "signed char", torch.uint8: "unsigned char", torch.bool: "bool",
              torch.complex64: "c10::complex<float>", torch.complex128: "c10::complex<double>"}


def _apart(out: torch.Tensor, *inputs) -> None:
    """at::assert_no_internal_overlap(out), then at::assert_no_overlap(out, input) for each."""
    if torch._debug_has_internal_overlap(out) == 1:  # 1: certainly overlaps (2: too hard to tell)
        raise RuntimeError(_INTERNAL_OVERLAP)
    for t in inputs:
        if isinstance(t, torch.Tensor) and out.numel() and t.numel() and torch._C._overlaps(out, t):
            raise RuntimeError(_OVERLAP)


def _same_dtype(out: torch.Tensor, dtype: torch.dtype) -> None:
    if out.dtype != dtype:
        raise RuntimeError(f"Expected out tensor to have dtype {_CPP_NAMES.get(dtype, dtype)}, but got "
                           f"{_CPP_NAMES.get(out.dtype, out.dtype)} instead")


# torch's ScalarType names, as its dtype dispatch names a dtype a kernel has no code for.
_SCALAR_TYPE_NAMES = {torch.float32: "Float", torch.float64: "Double", torch.bfloat16: "BFloat16", torch.float16: "Half",
                      torch.int64: "Long", torch.int32: "Int", torch.int16: "Short", torch.int8: "Char",
                      torch.uint8: "Byte", torch.bool: "Bool"}


def not_implemented_for(kernel: str, dtype: torch.dtype) -> NotImplementedError:
    """The error torch's dtype dispatch raises when `kernel` has no code for `dtype`."""
    return NotImplementedError(f'"{kernel}" not implemented for \'{_SCALAR_TYPE_NAMES.get(dtype, dtype)}\'')


def _floating_only(kernel: str):
    """A CPU kernel dispatched over floating types only: integer (and bool) operands are refused."""
    def check(a: dict) -> None:
        dtype = torch.result_type(a["self"], a["other"])
        if not dtype.is_floating_point:
            raise not_implemented_for(kernel, dtype)
    return check


def _index_add_shapes(a: dict) -> None:
    self, source = a["self"], a["source"]
    dim = a["dim"] % max(self.dim(), 1)
    self_sizes, source_sizes = list(self.shape), list(source.shape)
    if self.dim() and source.dim():
        del self_sizes[dim]
        if dim < source.dim():
            del source_sizes[dim]
    if self_sizes != source_sizes:
        raise RuntimeError("source tensor shape must match self tensor shape, excluding the specified dimension. "
                           f"Got self.shape = {list(self.shape)} source.shape = {list(source.shape)}")


_RULES = {
    "aten::cat.out": lambda a: _apart(a["out"], *a["tensors"]),
    "aten::take.out": lambda a: _apart(a["out"], a["self"], a["index"]),
    "aten::index_select.out": lambda a: _apart(a["out"], a["self"], a["index"]),
    "aten::aminmax.out": lambda a: (_same_dtype(a["min"], a["self"].dtype), _same_dtype(a["max"], a["self"].dtype)),
    "aten::index_add": _index_add_shapes,
    "aten::index_add_": _index_add_shapes,
    "aten::index_add.out": _index_add_shapes,
    "aten::igamma": _floating_only("igamma_cpu"),
    "aten::igammac": _floating_only("igammac_cpu"),
}


def raise_as_torchs_cpu_kernel(op: OpOverload, args, kwargs) -> None:
    """Raises what torch's CPU kernel of `op` raises for these arguments, where the rows above
    know it; returns otherwise."""
    rule = _RULES.get(op.name())  # ("aten::cat.out"; a default overload has no suffix)
    if rule is None:
        return
    named = {}
    for position, argument in enumerate(op._schema.arguments):
        if argument.name in kwargs:
            named[argument.name] = kwargs[argument.name]
        elif position < len(args) and not argument.kwarg_only:
            named[argument.name] = args[position]
    rule(named)
