"""Progress bars for long flushes. A full-size model's forward in defer_and_fuse is one flush of
thousands of kernels that can take minutes of host time; inside `with vtpu.progress():` each flush
that runs longer than a quarter of a second shows how many of its kernels have run (tqdm when it
is installed, else a line on stderr now and then). Short flushes show nothing and cost nothing:
the runtime only calls back after that quarter second (Runtime::progress_for)."""
from __future__ import annotations

import contextlib
import sys

from . import _C


_showing = False


class _Bar:
    """One bar per flush: a new one when a flush starts (its total changes or its count goes back)."""

    def __init__(self, stream):
        self._stream = stream
        self._bar = None
        self._broken = False

    def __call__(self, done: int, total: int) -> None:
        # A failing bar must not stop the flush it reports on (that would lose its results): it
        # stops drawing instead. Ctrl-C (KeyboardInterrupt, not an Exception) still goes through.
        if self._broken:
            return
        try:
            self._show(done, total)
        except Exception as e:  # noqa: BLE001
            self._broken = True
            print(f"vtpu.progress: the progress bar failed ({e!r}); the run goes on without it", file=self._stream)

    def _show(self, done: int, total: int) -> None:
        if self._bar is None or total != self._bar.total or done < self._bar.n:
            self.close()
            self._bar = self._open(total)
        self._bar.update(done - self._bar.n)
        if done == total:
            self.close()

    def _open(self, total: int):
        try:
            from tqdm import tqdm
        except ImportError:
            return _PlainBar(total, self._stream)
        return tqdm(total=total, desc="tpu kernels", unit="kernel", file=self._stream, leave=False)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        self._bar = None


class _PlainBar:
    """tqdm's interface, as little of it as _Bar uses, printing a line per update."""

    def __init__(self, total: int, stream):
        self.n = 0
        self.total = total
        self._stream = stream

    def update(self, step: int) -> None:
        self.n += step
        print(f"tpu kernels: {self.n}/{self.total}", file=self._stream, flush=True)

    def close(self) -> None:
        pass


@contextlib.contextmanager
def progress(enabled: bool = True, stream=None):
    """Shows the progress of long flushes inside the block (on `stream`, stderr by default). Inside
    another `progress()` block the outer one's bar goes on."""
    global _showing
    if not enabled or _showing:
        yield
        return
    bar = _Bar(stream or sys.stderr)
    _C.set_progress_listener(bar)
    _showing = True
    try:
        yield
    finally:
        _showing = False
        _C.set_progress_listener(None)
        bar.close()
