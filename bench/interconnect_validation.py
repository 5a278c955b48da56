"""The interconnect model against the one published collective measurement
(../shared/REFERENCES.md): all-gathers over an axis of 4 v5e chips without wraparound, from the
JAX scaling book's `sharding.md`. Each is modelled twice: by the closed form (sim/interconnect.h,
as vtpu._C.Slice) and by the all-gather kernel run on a simulated slice of 4 chips over
chip-to-chip DMA (what tpu_dist charges). Prints a Markdown table (docs/validation.md holds its
output).
Usage: PYTHONPATH=torch_bridge/python python3 bench/interconnect_validation.py
"""
from __future__ import annotations

import vtpu  # noqa: F401  (loads the extension)
from vtpu.distributed import interconnect

# (what, bytes of the gathered array, published seconds)
PUBLISHED = [
    ("bf16[2048, 8192] all-gather, axis of 4 of a v5e 8x4 mesh", 2048 * 8192 * 2, 680e-6),
    ("bf16[256, 256] all-gather, same axis (latency-bound)", 256 * 256 * 2, 8e-6),
]


def main() -> None:
    axis = interconnect.for_group(4, 4, topology="4", chip="v5e")  # an axis of 4: no wraparound on v5e
    print("| collective | bytes | published us | closed form us | error | simulated kernel us | error |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for what, nbytes, published in PUBLISHED:
        closed, simulated = axis.closed_form.all_gather(nbytes), axis.all_gather(nbytes)
        print(f"| {what} | {nbytes} | {published * 1e6:.1f} | {closed * 1e6:.1f} | "
              f"{100 * (closed - published) / published:+.1f}% | {simulated * 1e6:.1f} | "
              f"{100 * (simulated - published) / published:+.1f}% |")


if __name__ == "__main__":
    main()
