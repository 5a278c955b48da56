"""Sliced loads and stores of a VMEM block: `x_ref[pl.ds(r0, 8), :]`, `o_ref[8:16, 128:256] = v`.
A sliced load copies the window into a temporary the tracer adds, and a value stored into a
slice is computed into one and copied there (a Slice statement: vector loads and stores, tile by
tile), so every other statement still reads whole blocks. Rows may start anywhere, at offsets
affine in the program ids, as Mosaic's sublane offsets may; columns start on a 128-lane
boundary, at a fixed offset, and span whole 128-lane columns, as Mosaic requires of lanes. Each
window is checked inside its block at every grid step before the kernel runs.
"""
from __future__ import annotations

from .copies import Window, check_inside
from .tracing import Block, Ref, as_block, materialize, store, tracer


def _window(ref: Ref, key) -> Window:
    t = tracer()
    window = ref.at[key]
    col0 = window.col0.constant
    if window.cols % 128 or col0 is None or col0 % 128:
        raise t.fail(f"a slice of {window.cols} columns from column {'a program id' if col0 is None else col0}: slices "
                     "start at a fixed multiple of 128 lanes and span whole 128-lane columns")
    if window.rows % 8 and window.rows != 1:
        raise t.fail(f"a slice of {window.rows} rows: slices span whole 8-row groups, or one row")
    check_inside(window, "the slice")
    return window


def _slice(source: Window, target: Window) -> None:
    tracer().emit({"kind": "slice", "from": source.spec(), "to": target.spec(), "rows": source.rows,
                   "cols": source.cols, "target": target.ref.index, "operands": [source.ref.index]})


def sliced_load(ref: Ref, key) -> Block:
    window = _window(ref, key)
    temporary = tracer().temporary((window.rows, window.cols), ref.dtype)
    _slice(window, temporary.at[:, :])
    return Block(("load", temporary.index), temporary.shape, ref.dtype)


def sliced_store(ref: Ref, key, value) -> None:
    window = _window(ref, key)
    value = as_block(value, ref.dtype)
    t = tracer()
    if value.node[0] == "load" and value.shape == (window.rows, window.cols) and value.dtype == ref.dtype:
        source = materialize(value)  # a block as it is: copied straight from its ref
    else:
        source = t.temporary((window.rows, window.cols), ref.dtype)
        store(source, value)
    _slice(source.at[:, :], window)
