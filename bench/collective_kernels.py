"""Collective kernels (kernels/generators/collectives.h, run on a simulated slice over chip-to-chip
DMA) against the torus closed forms (sim/interconnect.h) they should approach once
bandwidth-bound: all-gather, reduce-scatter, all-reduce, all-to-all, broadcast and a send from the
first chip to the last on lines, rings, 2-D and 3-D tori, from latency-bound (8 KiB per chip) to
bandwidth-bound (8-16 MiB) arrays. Prints a Markdown table (docs/distributed.md quotes it). The
same kernels give tpu_dist its collective times.
Usage: PYTHONPATH=torch_bridge/python python3 bench/collective_kernels.py   (about 3 minutes here)
"""
from __future__ import annotations

import math

import vtpu

SLICES = [("v4", "4", "line"), ("v5e", "8", "line"), ("v5e", "16", "ring"), ("v5e", "2x4", "2-D lines"),
          ("v5e", "4x16", "2-D, one ring"), ("v4", "2x2x2", "3-D lines"), ("v4", "4x4x4", "3-D torus")]
KINDS = ["all_gather", "reduce_scatter", "all_reduce", "all_to_all", "broadcast", "send"]


def main() -> None:
    print("| chip | slice | shape | collective | bytes | closed form us | simulated us | simulated / closed |")
    print("| --- | --- | --- | --- | ---: | ---: | ---: | ---: |")
    for chip, topology, shape in SLICES:
        axes = list(vtpu._C.parse_topology(topology))
        closed_form = vtpu._C.Slice(axes, chip)
        for kind in KINDS:
            for nbytes in (8192 * math.prod(axes), (8 if math.prod(axes) > 16 else 16) << 20):
                last = math.prod(axes) - 1
                if kind == "send":  # from the first chip to the last
                    closed = closed_form.point_to_point(0, last, nbytes)
                else:
                    closed = getattr(closed_form, kind)(nbytes)
                simulated = vtpu._C.simulated_collective_seconds(kind, axes, chip, float(nbytes), 0, last)
                print(f"| {chip} | {topology} | {shape} | {kind} | {nbytes} | {closed * 1e6:.1f} | "
                      f"{simulated * 1e6:.1f} | {simulated / closed:.3f} |", flush=True)


if __name__ == "__main__":
    main()
