"""How an array of any rank >= 2 is seen a 2-D block at a time. As in Pallas, a block spec's
leading dims may be `None` (squeezed): the body sees the last two dims, `(block_rows, block_cols)`,
and the index map still returns one index per array dim. The chip sees the array flattened to
`(prod(leading) * rows, cols)`, where the block's row index is the leading indices and the row
index in Horner form, affine in the program ids like each of them. Arrays that are not whole
blocks along their last two dims are padded (here) and their outputs cut back (call.py).
"""
from __future__ import annotations

import math

import torch

from .copies import ANY
from .grid import Affine
from .tracing import KernelTraceError


def last_two(spec) -> tuple | None:
    """The block's last two dims, or None for a spec that gives no block (an array left in HBM too)."""
    if spec is None or spec.block_shape is None or spec.memory_space == ANY:
        return None
    return tuple(spec.block_shape)[-2:]


def whole_blocks(shape, block: tuple | None) -> tuple[int, ...]:
    """`shape` with its last two dims rounded up to whole blocks: Pallas runs a grid over arrays
    that are not whole blocks, the last block partial; here such arrays are padded (inputs with
    zeros, where Pallas leaves the padding unspecified) and outputs cut back."""
    if len(shape) < 2 or block is None or not all(isinstance(b, int) and b > 0 for b in block):
        return tuple(shape)
    return (*shape[:-2], *(-(-s // b) * b for s, b in zip(shape[-2:], block)))


def pad_to(x: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    if tuple(x.shape) == tuple(shape):
        return x
    return torch.nn.functional.pad(x, (0, shape[-1] - x.shape[-1], 0, shape[-2] - x.shape[-2]))


def cut_to(y: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    return y if tuple(y.shape) == tuple(shape) else y[..., :shape[-2], :shape[-1]].contiguous()


def flat_shape(shape) -> tuple[int, int]:
    """The 2-D array the chip sees: the leading dims folded into the rows."""
    return (math.prod(shape[:-2]) * shape[-2], shape[-1])


def as_flat(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    return x if x.dim() <= 2 else x.reshape(flat_shape(x.shape))  # (1-D: a scalar-prefetch table)


def block_of(block_shape, shape, what: str) -> tuple[int, int]:
    """The 2-D block the body sees; the leading dims must be squeezed (None)."""
    block = tuple(block_shape)
    if len(block) != len(shape):
        raise KernelTraceError(f"{what} has {len(shape)} dims but its block shape {block} has {len(block)}")
    if any(b is not None for b in block[:-2]) or any(b is None for b in block[-2:]):
        raise KernelTraceError(f"{what}'s block shape {block}: the body sees 2-D blocks, so every dim but the last two "
                               "is None (squeezed: one index of it per grid step) and the last two are sizes")
    return block[-2], block[-1]


def flat_row_index(index: list[Affine], blocks: tuple[int, ...]) -> Affine:
    """The block's row index in the flattened array: ((i0 * n1 + i1) * ... ) * row_blocks + i_rows,
    `blocks` being each dim's count (leading dims: their sizes; the last two: blocks along them)."""
    row = index[0]
    for i, n in zip(index[1:-1], blocks[1:-1]):
        row = row * n + i
    return row
