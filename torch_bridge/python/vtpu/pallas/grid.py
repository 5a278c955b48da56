"""Grid indices while tracing: `program_id(axis)` in the body (`pl.when` conditions, copy
offsets) and the values an index map is called with. An index map is traced once, with symbolic
grid indices, into `offset + sum(coef[g] * program_id(g))` per block dim (plus entries of
scalar-prefetch tables, scalar_prefetch.py), so the chip computes block addresses with a few
scalar instructions. Every block index and copy window is checked in range at every grid step
before the kernel runs: at the grid's corners when affine, at each step when it reads a table.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Callable

from .tracing import KernelTraceError, tracer


class Affine:
    """offset + sum(coef[g] * program_id(g)) + sum(scale * table[inner affine]) over the grid."""

    def __init__(self, coef: tuple[int, ...], offset: int = 0, lookups: tuple = ()):
        self.coef, self.offset = coef, offset
        self.lookups = lookups  # (table, scale, inner Affine without lookups)

    @staticmethod
    def of(value, dims: int) -> "Affine":
        if isinstance(value, Affine):
            return value
        if isinstance(value, int):
            return Affine((0,) * dims, value)
        raise KernelTraceError(f"{value!r} is not a block index: indices are ints, program ids times ints, and "
                               "scalar-prefetch entries")

    def __add__(self, o):
        o = Affine.of(o, len(self.coef))
        return Affine(tuple(a + b for a, b in zip(self.coef, o.coef)), self.offset + o.offset, self.lookups + o.lookups)

    __radd__ = __add__

    def __sub__(self, o):
        return self + (-1) * Affine.of(o, len(self.coef))

    def __rsub__(self, o):
        return Affine.of(o, len(self.coef)) - self

    def __mul__(self, k):
        if not isinstance(k, int):
            raise KernelTraceError("program ids are multiplied by ints only (block indices are affine)")
        return Affine(tuple(a * k for a in self.coef), self.offset * k,
                      tuple((table, scale * k, inner) for table, scale, inner in self.lookups))

    __rmul__ = __mul__

    def __neg__(self):
        return self * -1

    @property
    def constant(self) -> int | None:
        """The value at every grid step when it reads no program id or table; else None."""
        return None if any(self.coef) or self.lookups else self.offset

    def at(self, point: tuple[int, ...], tables: list[list[int]] | None = None) -> int:
        value = self.offset + sum(c * p for c, p in zip(self.coef, point))
        for table, scale, inner in self.lookups:
            value += scale * tables[table][inner.at(point)]
        return value

    def spec(self) -> tuple:
        return (list(self.coef), self.offset,
                [(table, scale, list(inner.coef), inner.offset) for table, scale, inner in self.lookups])

    # In a body, comparing program ids with an int makes a pl.when condition.
    def __eq__(self, value):  # type: ignore[override]
        return Condition(self, _int(value), True)

    def __ne__(self, value):  # type: ignore[override]
        return Condition(self, _int(value), False)

    __hash__ = None  # type: ignore[assignment]


def trace_index_map(index_map, grid: tuple[int, ...], what: str, tables: tuple = (), rank: int = 2) -> list[Affine]:
    """The block index per dim that `index_map(*program_ids, *scalar_prefetch_refs)` gives."""
    dims = len(grid)
    ids = [Affine(tuple(int(g == d) for g in range(dims))) for d in range(dims)]
    result = index_map(*ids, *tables)
    if not isinstance(result, tuple) or len(result) != rank:
        raise KernelTraceError(f"{what}'s index map returned {result!r}: blocks of {rank}-D arrays need {rank} indices")
    return [Affine.of(r, dims) for r in result]


@dataclass
class RangeCheck:
    """0 <= starts[d] and starts[d] + sizes[d] <= limits[d] at every grid step, else the error
    `message(grid index, starts)`."""
    starts: list[Affine]
    sizes: tuple[int, ...]
    limits: tuple[int, ...]
    message: Callable[[tuple, tuple], str]

    def reads_tables(self) -> bool:
        return any(a.lookups for a in self.starts)

    def run(self, grid: tuple[int, ...], tables: list[list[int]] | None = None) -> None:
        if tables is None and self.reads_tables():
            return  # checked at each call, with the tables' values
        points = (itertools.product(*[range(g) for g in grid]) if self.reads_tables()
                  else itertools.product(*[sorted({0, g - 1}) for g in grid]))
        for point in points:
            starts = tuple(a.at(point, tables) for a in self.starts)
            if any(s < 0 or s + n > limit for s, n, limit in zip(starts, self.sizes, self.limits)):
                raise KernelTraceError(self.message(point, starts))


@dataclass(frozen=True)
class Condition:
    """`affine == value` (or !=) over the program ids: what pl.when takes."""
    affine: Affine
    value: int
    equal: bool

    def spec(self) -> tuple:
        """The binding's form: (affine - value, equal), the statement running where it is (not) 0."""
        return ((self.affine - self.value).spec(), self.equal)


def _int(value) -> int:
    if not isinstance(value, int):
        raise tracer().fail("pl.when compares a program id with an int")
    return value


def program_id(axis: int) -> Affine:
    """This grid step's index along `axis`, while tracing: ints times it, plus ints, index copies
    (pl.ds) and make pl.when conditions (program_id(2) == 0)."""
    t = tracer()
    if not 0 <= axis < len(t.grid):
        raise t.fail(f"program_id({axis}) of a {len(t.grid)}-dim grid")
    return Affine(tuple(int(g == axis) for g in range(len(t.grid))))


def num_programs(axis: int) -> int:
    t = tracer()
    if not 0 <= axis < len(t.grid):
        raise t.fail(f"num_programs({axis}) of a {len(t.grid)}-dim grid")
    return t.grid[axis]


def when(condition: Condition):
    """Decorator: the function's statements run only at grid steps where `condition` holds."""
    if not isinstance(condition, Condition):
        raise tracer().fail("pl.when takes program ids compared with an int (program_id(0) == 0, !=)")

    def run(body):
        t = tracer()
        t.conditions.append(condition.spec())
        try:
            body()
        finally:
            t.conditions.pop()
        return body

    return run
