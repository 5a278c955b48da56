"""Grid indices while tracing: `program_id(axis)` in the body (`pl.when` conditions, copy
offsets) and the affine values an index map is called with. An index map is traced once, with symbolic grid
indices, into `offset + sum(coef[g] * program_id(g))` per block dim, so the chip computes block
addresses with a few scalar instructions; that it is affine also makes its range exact, and
every out-of-bounds block is found before the kernel runs.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

from .tracing import KernelTraceError, tracer


class Affine:
    """offset + sum(coef[g] * program_id(g)) over the grid's dims."""

    def __init__(self, coef: tuple[int, ...], offset: int = 0):
        self.coef, self.offset = coef, offset

    @staticmethod
    def of(value, dims: int) -> "Affine":
        if isinstance(value, Affine):
            return value
        if isinstance(value, int):
            return Affine((0,) * dims, value)
        raise KernelTraceError(f"an index map returned {value!r}: block indices are ints and program ids times ints")

    def __add__(self, o):
        o = Affine.of(o, len(self.coef))
        return Affine(tuple(a + b for a, b in zip(self.coef, o.coef)), self.offset + o.offset)

    __radd__ = __add__

    def __sub__(self, o):
        return self + (-1) * Affine.of(o, len(self.coef))

    def __rsub__(self, o):
        return Affine.of(o, len(self.coef)) - self

    def __mul__(self, k):
        if not isinstance(k, int):
            raise KernelTraceError("an index map may multiply a program id by an int only (block indices are affine)")
        return Affine(tuple(a * k for a in self.coef), self.offset * k)

    __rmul__ = __mul__

    def __neg__(self):
        return self * -1

    def at(self, point: tuple[int, ...]) -> int:
        return self.offset + sum(c * p for c, p in zip(self.coef, point))

    def spec(self) -> tuple:
        return (list(self.coef), self.offset)

    # In a body, comparing program ids with an int makes a pl.when condition.
    def __eq__(self, value):  # type: ignore[override]
        return Condition(self, _int(value), True)

    def __ne__(self, value):  # type: ignore[override]
        return Condition(self, _int(value), False)

    __hash__ = None  # type: ignore[assignment]


def trace_index_map(index_map, grid: tuple[int, ...], what: str) -> tuple[list[list[int]], list[int]]:
    """(coef per block dim, offset per block dim) of `index_map`."""
    dims = len(grid)
    ids = [Affine(tuple(int(g == d) for g in range(dims))) for d in range(dims)]
    result = index_map(*ids)
    if not isinstance(result, tuple) or len(result) != 2:
        raise KernelTraceError(f"{what}'s index map returned {result!r}: blocks of 2-D arrays need 2 indices")
    parts = [Affine.of(r, dims) for r in result]
    return [list(p.coef) for p in parts], [p.offset for p in parts]


def check_in_bounds(coef, offset, grid, blocks: tuple[int, int], what: str, where: str) -> None:
    """Each block index at every grid point in range (checked at the corners: the map is affine)."""
    corners = itertools.product(*[sorted({0, g - 1}) for g in grid]) if grid else [()]
    for point in corners:
        index = tuple(offset[d] + sum(c * p for c, p in zip(coef[d], point)) for d in range(2))
        if not all(0 <= index[d] < blocks[d] for d in range(2)):
            raise KernelTraceError(f"{what}'s index map sends grid index {point} to block {index}, outside the "
                                   f"{blocks[0]} x {blocks[1]} blocks of its array (index map at {where})")


@dataclass(frozen=True)
class Condition:
    """`affine == value` (or !=) over the program ids: what pl.when takes."""
    affine: Affine
    value: int
    equal: bool

    def spec(self) -> tuple:
        """The binding's form: ((coef, offset - value), equal), i.e. affine - value == 0."""
        return ((list(self.affine.coef), self.affine.offset - self.value), self.equal)


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
