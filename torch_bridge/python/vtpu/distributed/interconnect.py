"""Which slice a process group's collectives are timed on, and how. Every collective, send and
receive takes the time of its kernel run on a simulated slice of the group's chips
(kernels/generators/collectives.h over chip-to-chip DMA, through vtpu._C; timed once per size and
chips): links, hops, DMAs and the reductions' adds as the simulator models them. Beside each, the
slice's closed form (sim/interconnect.h, bound as vtpu._C.Slice: ring and torus costs per axis,
which axes wrap around by the chip's generation, the preset's link bandwidth and hop latency) is
`closed_form`, which the tests check the kernels against.

The whole world is the slice `VTPU_TOPOLOGY` names (one axis of all the ranks by default), one
chip per rank; a smaller group (a mesh dimension) is modelled as a line of its ranks, since which
chips it spans is not tracked.
"""

from __future__ import annotations

import math
import os

from .. import _C

Slice = _C.Slice


def parse_topology(text: str) -> tuple[int, ...]:
    return tuple(_C.parse_topology(text))  # ValueError naming the form when it is not a slice


class SimulatedSlice:
    """A slice whose collectives and point-to-point sends are simulated kernels; `closed_form` is
    the same slice's closed forms."""

    def __init__(self, closed_form: Slice, chip: str = ""):
        self.closed_form = closed_form
        self._chip = chip

    def _simulated(self, kind: str, nbytes: float, src: int = 0, dst: int = 0) -> float:
        return _C.simulated_collective_seconds(kind, list(self.closed_form.axes), self._chip, float(nbytes), src, dst)

    def all_gather(self, output_bytes: float) -> float:
        return self._simulated("all_gather", output_bytes)

    def reduce_scatter(self, input_bytes: float) -> float:
        return self._simulated("reduce_scatter", input_bytes)

    def all_reduce(self, nbytes: float) -> float:
        return self._simulated("all_reduce", nbytes)

    def all_to_all(self, input_bytes: float) -> float:  # uneven splits timed as equal chunks
        return self._simulated("all_to_all", input_bytes)

    def broadcast(self, nbytes: float) -> float:  # from any root, timed from rank 0
        return self._simulated("broadcast", nbytes)

    def scatter(self, input_bytes: float, root: int) -> float:  # the root's whole input, equal chunks
        return self._simulated("scatter", input_bytes, src=root)

    def gather(self, output_bytes: float, root: int) -> float:  # the root's whole output, equal chunks
        return self._simulated("gather", output_bytes, dst=root)

    def point_to_point(self, src: int, dst: int, nbytes: float) -> float:
        return self._simulated("send", nbytes, src, dst)

    def links(self, kind: str, nbytes: float, rank: int, src: int = 0,
              dst: int = 0) -> list[tuple[str, list[tuple[float, float]]]]:
        """What the links leaving `rank`'s chip carried during that collective kernel: per link,
        its transfers' (start, end) in seconds from the collective's start."""
        return _C.simulated_collective_links(kind, list(self.closed_form.axes), self._chip, float(nbytes), rank, src, dst)

    def __getattr__(self, name):  # axes, wraps, size, coordinates
        return getattr(self.closed_form, name)

    def __repr__(self) -> str:
        return f"Simulated{self.closed_form!r}"


def for_group(world_size: int, group_size: int, topology: str | None = None, chip: str = "") -> SimulatedSlice:
    topology = topology if topology is not None else os.environ.get("VTPU_TOPOLOGY")
    if group_size == world_size and topology:
        axes = parse_topology(topology)
        if math.prod(axes) != world_size:
            raise ValueError(f"vtpu: VTPU_TOPOLOGY={topology!r} has {math.prod(axes)} chips, "
                             f"but the process group has {world_size} ranks (one chip each)")
    else:
        axes = (group_size,)
    return SimulatedSlice(Slice(list(axes), chip), chip)
