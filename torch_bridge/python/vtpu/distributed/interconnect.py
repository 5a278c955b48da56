"""Which slice a process group's collectives are timed on. The closed forms themselves are the
simulator's (sim/interconnect.h, bound as vtpu._C.Slice): ring and torus costs per axis, which
axes wrap around by the chip's generation, the preset's link bandwidth and hop latency.

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


def for_group(world_size: int, group_size: int, topology: str | None = None, chip: str = "") -> Slice:
    topology = topology if topology is not None else os.environ.get("VTPU_TOPOLOGY")
    if group_size == world_size and topology:
        axes = parse_topology(topology)
        if math.prod(axes) != world_size:
            raise ValueError(f"vtpu: VTPU_TOPOLOGY={topology!r} has {math.prod(axes)} chips, "
                             f"but the process group has {world_size} ranks (one chip each)")
    else:
        axes = (group_size,)
    return Slice(list(axes), chip)
