"""A Pallas-style kernel API on the virtual chip (JAX's Pallas TPU programming model, on tpu
tensors): a kernel body over references to VMEM blocks, run at every point of a grid, each array's
block picked by a BlockSpec's index map, with the double-buffered HBM <-> VMEM pipeline around it.

    from vtpu import pallas as pl

    def add(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] + y_ref[...]

    f = pl.pallas_call(add, out_shape=pl.ShapeDtype((1024, 512)), grid=(4,),
                       in_specs=[pl.BlockSpec((256, 512), lambda i: (i, 0))] * 2,
                       out_specs=pl.BlockSpec((256, 512), lambda i: (i, 0)))
    z = f(x, y)      # x, y: float32 tpu tensors of shape (1024, 512)

See docs/tutorial.md. The body is traced once per input shapes into statements and lowered by the
chip's code generators (never interpreted per element); `f.source(inputs)` shows the assembly.
"""
from .call import BlockSpec, ShapeDtype, VMEM, assembly_call, pallas_call
from .copies import ANY, SemaphoreType, async_copy, ds, make_async_copy
from .grid import num_programs, program_id, when
from .scalar_prefetch import PrefetchScalarGridSpec
from .tracing import KernelTraceError, binary as _binary, broadcasted_iota, dot, iota, unary as _unary, where

exp = _unary("exp")
log = _unary("log")
tanh = _unary("tanh")
sqrt = _unary("sqrt")
rsqrt = _unary("rsqrt")
sigmoid = _unary("sigmoid")
reciprocal = _unary("reciprocal")
relu = _unary("relu")
silu = _unary("silu")
gelu = _unary("gelu")
erf = _unary("erf")
sin = _unary("sin")
cos = _unary("cos")
maximum = _binary("max")
minimum = _binary("min")


def sum(x, axis: int = -1, keepdims: bool = True):  # noqa: A001  (jnp's name)
    return x.sum(axis, keepdims)


def max(x, axis: int = -1, keepdims: bool = True):  # noqa: A001
    return x.max(axis, keepdims)


def mean(x, axis: int = -1, keepdims: bool = True):
    return x.mean(axis, keepdims)


__all__ = ["BlockSpec", "ShapeDtype", "VMEM", "pallas_call", "assembly_call", "ANY", "SemaphoreType", "ds",
           "make_async_copy", "async_copy", "PrefetchScalarGridSpec", "program_id", "num_programs", "when", "dot",
           "where", "iota", "broadcasted_iota",
           "KernelTraceError", "exp", "log", "tanh", "sqrt", "rsqrt", "sigmoid", "reciprocal", "relu", "silu", "gelu",
           "erf", "sin", "cos", "maximum", "minimum", "sum", "max", "mean"]
