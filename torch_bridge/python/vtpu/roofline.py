"""The figures of a performance report, from vtpu.stats() and the chip's preset: each kernel (one
fused label, summed over its launches) as a point of the chip's roofline, and the run's totals.
Nothing here draws (vtpu.report does).

What the simulator counts, and so what these figures mean:
- FLOPs are the MXU's work as executed: each `mxu.mm` is 8 rows times a full weight tile, so a
  matmul whose sizes are not multiples of the MXU counts its padding, and an f32 matmul counts
  each of its bf16 passes. Vector-unit arithmetic is not counted (an elementwise kernel has no
  FLOPs here: it is judged by its HBM bandwidth).
- HBM bytes are those the kernel's DMAs moved to and from HBM; intermediates held in VMEM between
  kernels cost none.
- Times are simulated seconds summed over launches; with several chips in one process they are
  chip-seconds, and the utilisations below are per chip.
"""
from __future__ import annotations

import dataclasses
import math


@dataclasses.dataclass(frozen=True)
class Chip:
    name: str
    peak_flops: float            # bf16, every TensorCore
    peak_bandwidth: float        # HBM, published bytes/s
    sustained_bandwidth: float   # what the model's DMAs stream at (hbm_efficiency of the peak)

    @property
    def ridge_intensity(self) -> float:
        """FLOPs per HBM byte where the compute roof meets the (peak) bandwidth roof."""
        return self.peak_flops / self.peak_bandwidth

    def roof(self, intensity: float) -> float:
        """The most FLOP/s a kernel of this arithmetic intensity can reach."""
        return min(self.peak_flops, intensity * self.peak_bandwidth)


def chip(name: str) -> Chip:
    import vtpu

    for c in vtpu._C.chip_presets():
        if c["name"] == name:
            bandwidth = c["hbm_bandwidth_bytes_per_s"]
            return Chip(name, c["peak_bf16_flops"], bandwidth, bandwidth * c["hbm_efficiency"])
    raise ValueError(f"vtpu: no chip preset named {name!r}")


@dataclasses.dataclass(frozen=True)
class KernelPoint:
    label: str
    launches: int
    seconds: float
    flops: float
    hbm_bytes: int
    share: float  # of the run's kernel time

    @property
    def intensity(self) -> float:
        """MXU FLOPs per HBM byte (inf for a kernel that moved no HBM bytes but computed)."""
        if self.flops == 0:
            return 0.0
        return self.flops / self.hbm_bytes if self.hbm_bytes else math.inf

    @property
    def achieved_flops(self) -> float:
        return self.flops / self.seconds if self.seconds else 0.0

    @property
    def achieved_bandwidth(self) -> float:
        return self.hbm_bytes / self.seconds if self.seconds else 0.0

    def bound(self, c: Chip) -> str:
        """Which roof limits it: "compute" right of the ridge point, "memory" left of it or without
        MXU work, "on chip" for a kernel that neither computed on the MXU nor touched HBM (it read
        and wrote VMEM held between kernels)."""
        if self.flops == 0:
            return "memory" if self.hbm_bytes else "on chip"
        return "compute" if self.intensity >= c.ridge_intensity else "memory"

    def roof_fraction(self, c: Chip) -> float | None:
        """How close it came to its roof: achieved FLOP/s over the roof at its intensity, or for a
        kernel without MXU work, its HBM bandwidth over the peak (None: neither)."""
        if self.flops == 0:
            return self.achieved_bandwidth / c.peak_bandwidth if self.hbm_bytes else None
        return self.achieved_flops / c.roof(self.intensity)

    def judged(self, c: Chip) -> str:
        """roof_fraction in words: "74% of roof", "80% of HBM peak" or "no HBM traffic"."""
        fraction = self.roof_fraction(c)
        if fraction is None:
            return "no HBM traffic"
        return f"{fraction:.0%} of {'roof' if self.flops else 'HBM peak'}"


@dataclasses.dataclass(frozen=True)
class Totals:
    chip: Chip
    seconds: float           # simulated kernel time
    launches: int
    flops: float             # MXU, as executed
    hbm_bytes: int
    model_flops: float | None  # the caller's count of the model's useful FLOPs, when given

    @property
    def mxu_utilisation(self) -> float:
        """Executed MXU FLOPs over what the chip's peak does in the same time (padding counts)."""
        return self.flops / (self.chip.peak_flops * self.seconds) if self.seconds else 0.0

    @property
    def mfu(self) -> float | None:
        """Model FLOPs utilisation: the model's useful FLOPs (given) over the peak's in the time."""
        if self.model_flops is None or not self.seconds:
            return None
        return self.model_flops / (self.chip.peak_flops * self.seconds)

    @property
    def hbm_utilisation(self) -> float:
        """HBM bytes moved over what the published peak bandwidth moves in the same time."""
        return self.hbm_bytes / (self.chip.peak_bandwidth * self.seconds) if self.seconds else 0.0


def kernels_and_totals(stats: dict, c: Chip, model_flops: float | None = None) -> tuple[list[KernelPoint], Totals]:
    """Every kernel of `stats` (vtpu.stats()) as a point, most time first, and the totals."""
    per_kernel = stats["per_kernel"]
    seconds = sum(k["seconds"] for k in per_kernel.values())
    points = [KernelPoint(label, k["launches"], k["seconds"], k["flops"], k["hbm_read_bytes"] + k["hbm_write_bytes"],
                          k["seconds"] / seconds if seconds else 0.0)
              for label, k in per_kernel.items()]
    points.sort(key=lambda p: (-p.seconds, p.label))
    totals = Totals(c, seconds, sum(p.launches for p in points), sum(p.flops for p in points),
                    sum(p.hbm_bytes for p in points), model_flops)
    return points, totals
