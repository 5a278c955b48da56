"""The chips' interconnect (ICI) in closed form: a slice's topology and the time each collective
takes on it, from the preset's links (../shared/REFERENCES.md, "The interconnect").

A slice is a torus of one to three axes (`VTPU_TOPOLOGY`, e.g. "4", "2x4", "2x2x2"; by default one
axis of all the ranks). An axis with wraparound is a bidirectional ring, each direction one link
of `link_bandwidth` bytes/s; without wraparound it is a line, which moves data as fast as a
one-way ring. Every hop costs `hop_latency` seconds. Collectives over several axes go axis by
axis: a reduce-scatter shrinks the data by each axis' size in turn, an all-gather grows it back
in reverse (the scaling book's torus algorithms).

These are the textbook ring costs, not a simulation of the links: vtpu.distributed charges them to
the chips' simulated clocks. Data moves between the ranks' processes through Gloo on the host.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

# About 1 us per hop (buffers under ~45 kB per hop are latency-bound on v5e): scaling book.
HOP_LATENCY_S = 1e-6

# Which axes wrap around, by generation: v5e/v6e only on an axis of 16 chips (a full pod side);
# v4, v5p and v7 (3-D tori) only when the slice is made of whole 4x4x4 cubes.
_TWO_D = ("v5e", "v6e")


@dataclass(frozen=True)
class Interconnect:
    chip: str
    axes: tuple[int, ...]
    wraps: tuple[bool, ...]
    link_bandwidth: float  # bytes/s, one way, per link
    hop_latency: float = HOP_LATENCY_S

    @property
    def size(self) -> int:
        return math.prod(self.axes)

    # --- per axis ----------------------------------------------------------------------------
    def _axis_gather(self, n: int, wraps: bool, total_bytes: float) -> float:
        """All-gather (or reduce-scatter) of `total_bytes` (the whole array) over one axis."""
        if n <= 1:
            return 0.0
        if wraps and n > 2:  # both directions of the ring carry half the data, half the hops
            return (n // 2) * self.hop_latency + (n - 1) / n * total_bytes / (2 * self.link_bandwidth)
        return (n - 1) * self.hop_latency + (n - 1) / n * total_bytes / self.link_bandwidth

    def _hops(self, n: int, wraps: bool) -> int:
        return n // 2 if wraps and n > 2 else n - 1

    # --- collectives, `nbytes` as each says ----------------------------------------------------
    def all_gather(self, output_bytes: float) -> float:
        """Every rank ends with the whole `output_bytes` array (each gave 1/size of it)."""
        seconds, data = 0.0, output_bytes / self.size
        for n, w in reversed(list(zip(self.axes, self.wraps))):  # grows back, last axis first
            data *= n
            seconds += self._axis_gather(n, w, data)
        return seconds

    def reduce_scatter(self, input_bytes: float) -> float:
        """Every rank gives `input_bytes` and ends with its reduced 1/size share."""
        seconds, data = 0.0, float(input_bytes)
        for n, w in zip(self.axes, self.wraps):
            seconds += self._axis_gather(n, w, data)
            data /= n
        return seconds

    def all_reduce(self, nbytes: float) -> float:
        return self.reduce_scatter(nbytes) + self.all_gather(nbytes)

    def broadcast(self, nbytes: float) -> float:
        """Pipelined along each axis in turn: the farthest chip's hops, then the data once."""
        return sum(self._hops(n, w) * self.hop_latency + (nbytes / self.link_bandwidth if n > 1 else 0.0)
                   for n, w in zip(self.axes, self.wraps))

    def all_to_all(self, input_bytes: float) -> float:
        """Each rank sends (size - 1)/size of `input_bytes` away: a quarter of an all-gather's
        traffic on a bidirectional ring (scaling book), twice that on a line."""
        seconds = 0.0
        for n, w in zip(self.axes, self.wraps):
            if n <= 1:
                continue
            width = 2 * self.link_bandwidth if w and n > 2 else self.link_bandwidth
            seconds += self._hops(n, w) * self.hop_latency + input_bytes * n / (4 * width)
        return seconds

    def point_to_point(self, src: int, dst: int, nbytes: float) -> float:
        """A copy from rank `src` to rank `dst`: the torus distance in hops, then the data."""
        hops = 0
        for n, w, a, b in zip(self.axes, self.wraps, self.coordinates(src), self.coordinates(dst)):
            d = abs(a - b)
            hops += min(d, n - d) if w and n > 2 else d
        return 0.0 if src == dst else hops * self.hop_latency + nbytes / self.link_bandwidth

    def coordinates(self, rank: int) -> tuple[int, ...]:
        out = []
        for n in reversed(self.axes):
            out.append(rank % n)
            rank //= n
        return tuple(reversed(out))


def parse_topology(text: str) -> tuple[int, ...]:
    try:
        axes = tuple(int(x) for x in text.lower().split("x"))
    except ValueError:
        axes = ()
    if not axes or len(axes) > 3 or any(n < 1 for n in axes):
        raise ValueError(f"vtpu: VTPU_TOPOLOGY={text!r} is not a slice such as '4', '2x4' or '2x2x2' (1 to 3 axes)")
    return axes


def wraparound(chip: str, axes: tuple[int, ...]) -> tuple[bool, ...]:
    if chip in _TWO_D:
        return tuple(n == 16 for n in axes)
    whole_cubes = len(axes) == 3 and all(n % 4 == 0 for n in axes)
    return tuple(whole_cubes for _ in axes)


def for_group(chip: dict, world_size: int, group_size: int, topology: str | None = None) -> Interconnect:
    """The interconnect a group of `group_size` ranks sees. The whole world is the slice
    (`VTPU_TOPOLOGY`, or one axis of all ranks); a smaller group is modelled as a line of its
    ranks (which chips it spans is not tracked)."""
    topology = topology if topology is not None else os.environ.get("VTPU_TOPOLOGY")
    if group_size == world_size and topology:
        axes = parse_topology(topology)
        if math.prod(axes) != world_size:
            raise ValueError(f"vtpu: VTPU_TOPOLOGY={topology!r} has {math.prod(axes)} chips, "
                             f"but the process group has {world_size} ranks (one chip each)")
    else:
        axes = (group_size,)
    return Interconnect(chip["name"], axes, wraparound(chip["name"], axes), chip["ici_link_bandwidth_bytes_per_s"])
