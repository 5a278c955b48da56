"""Collectives of tpu_dist in flight on the simulated timeline (process_group.py): the works
its collectives return, and each chip's interconnect, which runs them one after another."""

from __future__ import annotations

import torch.distributed as dist
from torch.futures import Future

from .. import _C
from ..device_module import in_side_stream

# Each chip's interconnect, by device index in this process: when it finishes what it was given.
interconnect_free_at: dict[int, float] = {}


def _chip_waits(device: int | None, end: float | None) -> None:
    """The chip waits for a collective (work.wait()): work issued before it runs first, and runs
    beside the collective; whatever comes after starts at its end at the earliest. Inside a
    torch.tpu.stream block the wait holds up that side stream only, so the chip does not stall:
    what reads the results waits for their arrival."""
    if device is not None and end is not None and not in_side_stream():
        _C.synchronize(device)
        _C.wait_until(device, end)


class InFlight(dist.Work):
    """A collective done on the host whose results are in flight on the simulated timeline until
    `end`. Their buffers carry that arrival, so whatever reads them waits; wait() makes the chip
    wait for it too. get_future() gives the results at once (DDP's hooks chain on it)."""

    def __init__(self, result, device: int | None, end: float | None):
        super().__init__()
        self._result, self._device, self.end = result, device, end

    @staticmethod
    def together(works: list["InFlight"], result) -> "InFlight":
        ends = [w.end for w in works if w.end is not None]
        device = next((w._device for w in works if w._device is not None), None)
        return InFlight(result, device, max(ends) if ends else None)

    def wait(self, timeout=None) -> bool:
        _chip_waits(self._device, self.end)
        return True

    def is_completed(self) -> bool:
        return True

    def get_future(self):
        future = Future()
        future.set_result(self._result)
        return future


class P2PWork(dist.Work):
    """A send or receive in flight on Gloo. wait() finishes it on the host (a receive's data
    reaches its tpu tensors then, arriving on the simulated timeline as arrive() says) and makes
    the chip wait for it."""

    def __init__(self, works, tensors, device: int | None, arrive):
        super().__init__()
        self._works, self._tensors, self._device, self._arrive = works, tensors, device, arrive

    def wait(self, timeout=None) -> bool:
        if self._works:
            for w in self._works:
                w.wait()
            self._works = []
            _chip_waits(self._device, self._arrive())
        return True

    def is_completed(self) -> bool:
        return not self._works

    def get_future(self):
        self.wait()
        future = Future()
        future.set_result(self._tensors)
        return future
