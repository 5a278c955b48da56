"""Tracing a kernel body once into statements over VMEM blocks (what kernels/generators/
block_kernel lowers). The body runs on `Ref`s; reading `ref[...]` gives a `Block`, a small
expression tree; storing it (`ref[...] = value`) becomes an elementwise statement. A dot or a
reduction (over rows or columns) is a statement of its own whose result lands in a VMEM temporary
the tracer adds, so every statement reads whole blocks from refs (slices.py copies windows).
Values compute in f32 (int32 for integer blocks) registers; a store rounds to its ref's dtype, as
Mosaic does on chips without a bf16 VPU.
"""
from __future__ import annotations

import contextlib
import itertools
import traceback

import torch

_CODES = {torch.float32: "f32", torch.bfloat16: "bf16", torch.int32: "i32"}


class KernelTraceError(ValueError):
    """What a kernel body does that the chip cannot: names the kernel and the body's line."""


def dtype_code(dtype: torch.dtype, what: str) -> str:
    if dtype not in _CODES:
        raise KernelTraceError(f"{what} is {dtype}: kernel blocks are float32, bfloat16 or int32")
    return _CODES[dtype]


def _value_type(dtype: torch.dtype) -> str:
    return "i32" if dtype == torch.int32 else "mask" if dtype == torch.bool else "f32"


class Tracer:
    """One trace: the refs (inputs, outputs, scratch, temporaries) and the statements so far."""

    current: "Tracer | None" = None

    def __init__(self, name: str, grid: tuple[int, ...]):
        self.name, self.grid = name, grid
        self.refs: list[dict] = []
        self.body: list[dict] = []
        self.conditions: list[tuple] = []
        self.semaphores = 0
        self.checks: list = []  # grid.RangeCheck of block indices and copy windows

    def check(self, c) -> None:
        """Runs a range check now, or at each call when it reads scalar-prefetch tables."""
        c.run(self.grid)
        self.checks.append(c)

    def add_ref(self, kind: str, dtype: torch.dtype, shape, block, index=None, in_hbm=False) -> "Ref":
        """`index`: the block index per dim (grid.Affine specs); none for a block that never moves."""
        fixed = ([0] * len(self.grid), 0, [])
        self.refs.append({"kind": kind, "dtype": dtype_code(dtype, f"{kind} {len(self.refs)}"), "shape": list(shape),
                          "block": list(block), "index": index or [fixed, fixed], "in_hbm": in_hbm})
        return Ref(self, len(self.refs) - 1, tuple(block), dtype, in_hbm)

    def temporary(self, shape, dtype) -> "Ref":
        return self.add_ref("scratch", dtype, shape, shape)

    def emit(self, statement: dict) -> None:
        statement["when"] = list(self.conditions)
        statement["line"] = user_line()
        self.body.append(statement)

    def describe(self, message: str, where: str | None = None) -> str:
        """`message` naming the kernel and the line (`where`; by default the line being traced)."""
        return f"kernel '{self.name}': {message} (at {where or user_line()})"

    def fail(self, message: str) -> KernelTraceError:
        return KernelTraceError(self.describe(message))


def user_line() -> str:
    """The innermost frame outside vtpu.pallas: the kernel body's line being traced."""
    for frame in reversed(traceback.extract_stack()):
        if "/vtpu/pallas/" not in frame.filename.replace("\\", "/"):
            return f"{frame.filename}:{frame.lineno}"
    return "?"


def tracer() -> Tracer:
    if Tracer.current is None:
        raise KernelTraceError("this is only meaningful inside a kernel body traced by vtpu.pallas.pallas_call")
    return Tracer.current


@contextlib.contextmanager
def tracing(t: Tracer):
    previous, Tracer.current = Tracer.current, t
    try:
        yield t
    finally:
        Tracer.current = previous


def _promote(a: torch.dtype, b: torch.dtype) -> torch.dtype:
    return torch.promote_types(a, b)


class Block:
    """A block's value: an expression tree over refs' blocks, of shape (rows, cols), a row statistic
    (rows, 1), a row vector (1, cols) or a number (1, 1)."""

    def __init__(self, node: tuple, shape: tuple[int, int], dtype: torch.dtype):
        self.node, self.shape, self.dtype = node, shape, dtype

    # Elementwise arithmetic with torch's promotion; Python numbers are weak like torch's.
    def _binary(self, op: str, other, reverse: bool = False, out_dtype: torch.dtype | None = None) -> "Block":
        other = as_block(other, self.dtype)
        a, b = (other, self) if reverse else (self, other)
        shape = _broadcast(a.shape, b.shape)
        dtype = out_dtype or _promote(a.dtype, b.dtype)
        return Block(("binary", op, a.node, b.node), shape, dtype)

    def __add__(self, o): return self._binary("add", o)
    def __radd__(self, o): return self._binary("add", o, True)
    def __sub__(self, o): return self._binary("sub", o)
    def __rsub__(self, o): return self._binary("sub", o, True)
    def __mul__(self, o): return self._binary("mul", o)
    def __rmul__(self, o): return self._binary("mul", o, True)
    def __truediv__(self, o): return self._binary("div", o, out_dtype=_float_of(self, o))
    def __rtruediv__(self, o): return self._binary("div", o, True, out_dtype=_float_of(self, o))
    def __pow__(self, o): return self._binary("pow", o)
    def __lt__(self, o): return self._binary("lt", o, out_dtype=torch.bool)
    def __le__(self, o): return self._binary("le", o, out_dtype=torch.bool)
    def __gt__(self, o): return self._binary("gt", o, out_dtype=torch.bool)
    def __ge__(self, o): return self._binary("ge", o, out_dtype=torch.bool)
    def __eq__(self, o): return self._binary("eq", o, out_dtype=torch.bool)  # type: ignore[override]
    def __ne__(self, o): return self._binary("ne", o, out_dtype=torch.bool)  # type: ignore[override]
    def __and__(self, o): return self._binary("and", o, out_dtype=torch.bool)
    def __or__(self, o): return self._binary("or", o, out_dtype=torch.bool)
    def __neg__(self): return Block(("unary", "neg", self.node), self.shape, self.dtype)
    def __abs__(self): return Block(("unary", "abs", self.node), self.shape, self.dtype)
    def __matmul__(self, o): return dot(self, o)
    __hash__ = None  # type: ignore[assignment]

    def astype(self, dtype: torch.dtype) -> "Block":
        if dtype == torch.bool:
            return self != 0
        code = "i32" if dtype == torch.int32 else "f32"
        node = self.node if _value_type(self.dtype) == code else ("cast", self.node, code)
        if dtype == torch.bfloat16 and self.dtype != torch.bfloat16:
            node = ("unary", "round_bf16", node)  # the value a bf16 array would hold
        return Block(node, self.shape, dtype)

    to = astype

    def sum(self, axis: int = -1, keepdims: bool = True) -> "Block":
        return reduction("sum", self, axis, keepdims)

    def max(self, axis: int = -1, keepdims: bool = True) -> "Block":
        return reduction("max", self, axis, keepdims)

    def mean(self, axis: int = -1, keepdims: bool = True) -> "Block":
        return self.sum(axis, keepdims) / self.shape[axis]


def _float_of(a: Block, b) -> torch.dtype:
    dtype = _promote(a.dtype, b.dtype) if isinstance(b, Block) else a.dtype
    return dtype if dtype.is_floating_point else torch.float32


def _broadcast(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    """torch's broadcasting of two blocks: a dim of 1 stretches (a row statistic is (rows, 1), a
    row vector (1, cols); the chip reads them lane- or sublane-broadcast)."""
    if any(x != y and 1 not in (x, y) for x, y in zip(a, b)):
        raise tracer().fail(f"blocks of shapes {a} and {b} do not broadcast")
    return (max(a[0], b[0]), max(a[1], b[1]))


def as_block(value, like: torch.dtype = torch.float32) -> Block:
    from .grid import Affine  # grid builds on this module
    if isinstance(value, Block):
        return value
    if isinstance(value, Affine):  # a program id or scalar-prefetch entry: one int32 per grid step
        from .scalar_prefetch import scalar_block
        return scalar_block(value)
    if isinstance(value, bool):
        return Block(("const", float(value), "i32"), (1, 1), torch.bool)
    if isinstance(value, (int, float)):
        integer = isinstance(value, int) and not like.is_floating_point
        return Block(("const", float(value), "i32" if integer else "f32"), (1, 1), like if integer or like.is_floating_point
                     else torch.float32)
    raise tracer().fail(f"{type(value).__name__} is not a block value (use ref[...] loads, numbers and vtpu.pallas math)")


class Ref:
    """A kernel parameter: the current grid step's block of an input or output, or a scratch
    buffer. `ref[...]` reads the whole block, `ref[...] = value` writes it; `ref[pl.ds(r0, 8), :]`
    reads or writes a window of it (slices.py)."""

    def __init__(self, t: Tracer, index: int, shape: tuple[int, int], dtype: torch.dtype, in_hbm: bool = False):
        self.tracer, self.index, self.shape, self.dtype, self.in_hbm = t, index, shape, dtype, in_hbm

    def extent(self) -> tuple[int, int]:
        """What a window (ref.at[...]) may cover: the block, or the whole array of an HBM ref."""
        return self.shape

    @property
    def at(self):
        """Windows for copies: ref.at[pl.ds(row0, rows), pl.ds(col0, cols)] (vtpu/pallas/copies.py)."""
        from .copies import At
        return At(self)

    def _whole(self, key) -> bool:
        """Whether `key` reads or writes the whole block (else a slice of it: slices.py)."""
        if self.in_hbm:
            raise self.tracer.fail("this ref is in HBM (memory_space=pl.ANY): copy a window to VMEM with "
                                   "pl.make_async_copy and read that")
        return key is Ellipsis or key == slice(None) or key == (slice(None), slice(None))

    def __getitem__(self, key) -> Block:
        if self._whole(key):
            return Block(("load", self.index), self.shape, self.dtype)
        from .slices import sliced_load  # slices build on this module
        return sliced_load(self, key)

    def __setitem__(self, key, value) -> None:
        if self._whole(key):
            store(self, as_block(value, self.dtype))
            return
        from .slices import sliced_store
        sliced_store(self, key, value)


# An expression's operands, numbered in this order: the refs it loads, then the per-step scalars
# (program ids, scalar-prefetch entries), then the iotas.
_LEAVES = ("load", "scalar", "iota")


def _flatten(node: tuple, nodes: list, leaves: dict[str, list], memo: dict) -> int:
    """Appends `node`'s tree to `nodes` (the binding's tuples); each leaf becomes an input
    ("input", (kind, k), type), numbered once all leaves are known (store)."""
    if node in memo:
        return memo[node]
    kind = node[0]
    if kind in _LEAVES:
        group = leaves[kind]
        if node[1] not in group:
            group.append(node[1])
        value_type = _value_type(_DTYPES[tracer().refs[node[1]]["dtype"]]) if kind == "load" else "i32"
        out = ("input", (kind, group.index(node[1])), value_type)
    elif kind == "const":
        out = node
    elif kind == "unary":
        out = ("unary", node[1], _flatten(node[2], nodes, leaves, memo))
    elif kind == "binary":
        out = ("binary", node[1], _flatten(node[2], nodes, leaves, memo), _flatten(node[3], nodes, leaves, memo))
    elif kind == "where":
        out = ("where",) + tuple(_flatten(n, nodes, leaves, memo) for n in node[1:])
    else:  # cast
        out = ("cast", _flatten(node[1], nodes, leaves, memo), node[2])
    nodes.append(out)
    memo[node] = len(nodes) - 1
    return memo[node]


_DTYPES = {code: dtype for dtype, code in _CODES.items()}


def store(ref: Ref, value: Block) -> None:
    t = ref.tracer
    if value.shape not in (ref.shape, (1, 1)):
        raise t.fail(f"a {value.shape} value stored into a {ref.shape} block")
    if value.dtype.is_floating_point and not ref.dtype.is_floating_point:
        raise t.fail(f"a {value.dtype} value stored into an {ref.dtype} block: cast it with .astype first")
    nodes: list = []
    leaves: dict[str, list] = {kind: [] for kind in _LEAVES}
    output = _flatten(value.node, nodes, leaves, {})
    first = dict(zip(_LEAVES, itertools.accumulate((len(leaves[kind]) for kind in _LEAVES[:-1]), initial=0)))
    nodes = [("input", first[n[1][0]] + n[1][1], n[2]) if n[0] == "input" else n for n in nodes]
    t.emit({"kind": "assign", "target": ref.index, "operands": leaves["load"], "nodes": nodes, "output": output,
            "scalars": leaves["scalar"], "iotas": leaves["iota"]})


def materialize(value: Block) -> Ref:
    """The ref holding `value`: the ref it loads as it is, else a temporary assigned from it."""
    t = tracer()
    if value.node[0] == "load":
        r = t.refs[value.node[1]]
        return Ref(t, value.node[1], tuple(r["block"]), _DTYPES[r["dtype"]], r["in_hbm"])
    ref = t.temporary(value.shape, torch.int32 if value.dtype in (torch.int32, torch.bool) else torch.float32)
    store(ref, value)
    return ref


def dot(a, b, preferred_element_type: torch.dtype = torch.float32) -> Block:
    """a @ b on the MXUs: bf16 products, f32 accumulation (f32 operands round to bf16 first, like
    torch's 'medium' matmul precision and Pallas's default)."""
    t = tracer()
    a, b = as_block(a), as_block(b)
    if a.shape[1] != b.shape[0]:
        raise t.fail(f"dot of {a.shape} and {b.shape} blocks")
    left, right = materialize(a), materialize(b)
    out = t.temporary((a.shape[0], b.shape[1]), torch.float32)
    t.emit({"kind": "dot", "target": out.index, "operands": [left.index, right.index], "accumulate": False})
    result = Block(("load", out.index), out.shape, torch.float32)
    return result if preferred_element_type == torch.float32 else result.astype(preferred_element_type)


def reduction(op: str, value: Block, axis: int, keepdims: bool) -> Block:
    """Sum or max over axis 1 (each row: a (rows, 1) row statistic) or axis 0 (each column: a
    (1, cols) row vector), in f32."""
    t = tracer()
    if axis not in (-2, -1, 0, 1) or not keepdims:
        raise t.fail("reductions run over axis 0 or 1 (-1) with keepdims=True: blocks stay 2-D")
    axis %= 2
    value = value if value.dtype.is_floating_point else value.astype(torch.float32)
    if value.shape[axis] == 1:  # nothing to reduce (a row statistic's lanes are copies of one value)
        return value.astype(torch.float32)
    source = materialize(value)
    out = t.temporary((value.shape[0], 1) if axis == 1 else (1, value.shape[1]), torch.float32)
    t.emit({"kind": f"{'row' if axis == 1 else 'column'}_{op}", "target": out.index, "operands": [source.index]})
    return Block(("load", out.index), out.shape, torch.float32)


def iota(shape: tuple[int, int], dimension: int, dtype: torch.dtype = torch.int32) -> Block:
    """Each element's index along `dimension` of a block of `shape` (lax.broadcasted_iota)."""
    if dimension not in (0, 1) or len(shape) != 2:
        raise tracer().fail("iota makes 2-D blocks, along dimension 0 or 1")
    return Block(("iota", dimension), tuple(shape), torch.int32).astype(dtype)


def broadcasted_iota(dtype: torch.dtype, shape: tuple[int, int], dimension: int) -> Block:
    return iota(shape, dimension, dtype)


def where(condition, a, b) -> Block:
    condition, a, b = as_block(condition), as_block(a), as_block(b)
    shape = _broadcast(_broadcast(condition.shape, a.shape), b.shape)
    return Block(("where", condition.node, a.node, b.node), shape, _promote(a.dtype, b.dtype))


def unary(op: str):
    def apply(x) -> Block:
        x = as_block(x)
        dtype = x.dtype if x.dtype.is_floating_point else torch.float32
        return Block(("unary", op, x.node), x.shape, dtype)
    apply.__name__ = op
    return apply


def binary(op: str):
    def apply(x, y) -> Block:
        return as_block(x)._binary(op, y)
    apply.__name__ = op
    return apply

