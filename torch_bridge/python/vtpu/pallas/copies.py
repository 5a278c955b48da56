"""Manual DMAs, as in Pallas TPU: an array given `memory_space=pl.ANY` stays in HBM (no block, no
pipeline), and the body moves windows of it to and from VMEM buffers itself with
`pl.make_async_copy(src, dst, sem).start()` / `.wait()` on semaphores from `scratch_shapes`
(`pl.SemaphoreType.DMA`). Windows are `ref.at[pl.ds(start, size), pl.ds(...)]` with starts affine
in the program ids, checked in bounds at every grid step before the kernel runs. A vector access
of VMEM a copy has not been waited for is a race and fails on the chip (sim/dma_tracker.h); a
wait no copy will ever signal is a deadlock, each naming the body's line.
"""
from __future__ import annotations

from dataclasses import dataclass

from .grid import Affine, RangeCheck
from .tracing import Ref, tracer, user_line

ANY = "any"  # memory_space: left in HBM


@dataclass(frozen=True)
class ds:  # noqa: N801  (Pallas's name)
    """`size` elements from `start` (an int or an affine function of the program ids)."""
    start: object
    size: int


class Semaphore:
    """A DMA semaphore of the body (scratch_shapes=[pl.SemaphoreType.DMA])."""

    def __init__(self, index: int):
        self.index = index


class SemaphoreType:
    DMA = "dma_semaphore"


@dataclass(frozen=True)
class Window:
    """Rows [row0, row0 + rows) and columns [col0, col0 + cols) of a ref."""
    ref: Ref
    row0: Affine
    col0: Affine
    rows: int
    cols: int

    def spec(self) -> dict:
        return {"ref": self.ref.index, "row0": self.row0.spec(), "col0": self.col0.spec()}


class At:
    def __init__(self, ref: Ref):
        self.ref = ref

    def __getitem__(self, key) -> Window:
        key = key if isinstance(key, tuple) else (key, slice(None))
        if len(key) != 2:
            raise tracer().fail("a window of a 2-D ref takes two indices (pl.ds, a fixed slice or :)")
        dims = len(tracer().grid)
        parts = [_dim(k, extent, dims) for k, extent in zip(key, self.ref.extent())]
        return Window(self.ref, parts[0][0], parts[1][0], parts[0][1], parts[1][1])


def _dim(key, extent: int, dims: int) -> tuple[Affine, int]:
    if isinstance(key, slice) and key.step in (None, 1) and all(isinstance(k, (int, type(None))) for k in (key.start, key.stop)):
        start, stop, _ = key.indices(extent)  # a fixed slice, as Python reads it (clipped to the extent)
        return Affine.of(start, dims), max(stop - start, 0)
    if isinstance(key, ds):
        return Affine.of(key.start, dims), key.size
    raise tracer().fail("window indices are pl.ds(start, size), fixed slices (8:16) or ':'")


def _window(x) -> Window:
    if isinstance(x, Window):
        return x
    if isinstance(x, Ref):
        return x.at[:, :]
    raise tracer().fail(f"a copy's ends are refs or ref.at[...] windows, not {type(x).__name__}")


def check_inside(window: Window, what: str) -> None:
    """`window` inside its ref at every grid step, else an error naming `what` ("the slice")."""
    t = tracer()
    extent = window.ref.extent()
    where = user_line()  # a check that reads a table runs at each call: name the body's line, not the caller's

    def message(point, starts) -> str:
        (r0, c0) = starts
        return t.describe(f"{what} at grid index {point} is rows [{r0}, {r0 + window.rows}), columns "
                          f"[{c0}, {c0 + window.cols}) of a {extent[0]} x {extent[1]} ref", where)

    t.check(RangeCheck([window.row0, window.col0], (window.rows, window.cols), extent, message))


class AsyncCopy:
    """One DMA between HBM and VMEM (Pallas's make_async_copy): start() issues it, wait() waits
    for a copy on its semaphore to land."""

    def __init__(self, src, dst, sem: Semaphore):
        t = tracer()
        self.src, self.dst = _window(src), _window(dst)
        if not isinstance(sem, Semaphore):
            raise t.fail("a copy signals a semaphore from scratch_shapes (pl.SemaphoreType.DMA)")
        if (self.src.rows, self.src.cols) != (self.dst.rows, self.dst.cols):
            raise t.fail(f"a copy of {self.src.rows} x {self.src.cols} elements into a "
                         f"{self.dst.rows} x {self.dst.cols} window")
        if self.src.ref.in_hbm == self.dst.ref.in_hbm:
            raise t.fail("a copy moves data between an HBM ref (memory_space=pl.ANY) and a VMEM ref")
        check_inside(self.src, "the copy's source")
        check_inside(self.dst, "the copy's destination")
        self.sem = sem

    def start(self) -> "AsyncCopy":
        tracer().emit({"kind": "copy", "from": self.src.spec(), "to": self.dst.spec(), "rows": self.src.rows,
                       "cols": self.src.cols, "semaphore": self.sem.index, "target": self.dst.ref.index,
                       "operands": [self.src.ref.index]})
        return self

    def wait(self) -> None:
        tracer().emit({"kind": "wait", "semaphore": self.sem.index, "target": -1, "operands": []})


def make_async_copy(src, dst, sem: Semaphore) -> AsyncCopy:
    return AsyncCopy(src, dst, sem)


def async_copy(src, dst, sem: Semaphore) -> AsyncCopy:
    return AsyncCopy(src, dst, sem).start()
