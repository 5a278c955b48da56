"""Scalar prefetch, as in Pallas TPU (PrefetchScalarGridSpec): the first `num_scalar_prefetch`
inputs are 1-D int32 tables the kernel copies to on-chip memory before its grid. Index maps get
them after the program ids (`lambda i, j, idx: (idx[i], j)`), and so does the body, where
`idx[i]` is this step's entry: a block index, a copy offset, a pl.when condition, or a number in
the body's arithmetic. The chip reads an entry with one scalar load (`sld`) per use.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .grid import Affine, RangeCheck
from .tracing import Block, KernelTraceError, tracer, user_line


class ScalarTable:
    """A scalar-prefetch table while tracing: `table[i]` with `i` an int or an affine function of
    the program ids."""

    def __init__(self, number: int, length: int, dims: int):
        self.number, self.length, self.dims = number, length, dims

    def __getitem__(self, index) -> Affine:
        inner = Affine.of(index, self.dims)
        if inner.lookups:
            raise KernelTraceError("a scalar-prefetch entry is indexed by program ids and ints, not by another entry")
        t = tracer()
        length = self.length
        where = user_line()  # checked at each call, with the table's values: name this line, not the caller's

        def message(point, starts) -> str:
            return t.describe(f"scalar-prefetch table {self.number} (length {length}) read at {starts[0]} at grid "
                              f"index {point}", where)

        t.check(RangeCheck([inner], (1,), (length,), message))
        return Affine((0,) * self.dims, 0, ((self.number, 1, inner),))


@dataclass(frozen=True)
class PrefetchScalarGridSpec:
    """pallas_call(kernel, out_shape, grid_spec=PrefetchScalarGridSpec(...)) as in Pallas."""
    num_scalar_prefetch: int
    grid: tuple[int, ...] = ()
    in_specs: list = field(default_factory=list)
    out_specs: object = None
    scratch_shapes: tuple = ()


def check_tables(tables, count: int, name: str) -> list[int]:
    """The tables' lengths; each must be a 1-D int32 tpu tensor."""
    if len(tables) < count:
        raise KernelTraceError(f"kernel '{name}' takes {count} scalar-prefetch tables first, was given {len(tables)} tensors")
    for i, table in enumerate(tables[:count]):
        if table.dim() != 1 or table.dtype != torch.int32:
            raise KernelTraceError(f"kernel '{name}': scalar-prefetch table {i} is {table.dtype} of shape "
                                   f"{tuple(table.shape)}; tables are 1-D int32")
    return [int(t.numel()) for t in tables[:count]]


def scalar_block(entry: Affine) -> Block:
    """A table entry (or any int affine of program ids) as a value in the body's arithmetic."""
    return Block(("scalar", _hashable(entry.spec())), (1, 1), torch.int32)


def _hashable(spec):
    return tuple(_hashable(x) for x in spec) if isinstance(spec, (list, tuple)) else spec
