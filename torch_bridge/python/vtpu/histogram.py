"""torch.histogram on the chip, as torch's CPU kernel computes it (aten/src/ATen/native/Histogram.cpp
and cpu/HistogramKernel.cpp): an element x in [edges[0], edges[-1]] (NaN and the rest skipped)
falls into bin upper_bound(edges, x) - 1, the last bin keeping its right edge, and adds its weight
(1 without weights); density divides by the total and by each bin's width.

With a bin count, the edges are the CPU's linspace between the range (or the input's minimum and
maximum, synced to the host: torch checks them there too, and so do these), computed on the host
in f32 as its linspace kernel does, so that an element on an edge lands in the CPU's bin.
"""
from __future__ import annotations

import math

import torch

from .composed_fallback import run_on_cpu
from .float_bits import round_to_f32
from .python_kernels import register


def _linspace_f32(start: float, end: float, steps: int) -> list[float]:
    """torch.linspace(start, end, steps) in float32 as the CPU computes it: the ends rounded to f32,
    step = (end - start) / (steps - 1) in f32, the first half start + step * i, the second half
    end - step * (steps - 1 - i), each rounded once, as the CPU's kernel gives them (rounding the
    product as well misplaced 2 of 8 edges). In double, step * i is exact, and an f32
    operation done in double and rounded once is the f32 operation's."""
    start, end = round_to_f32(start), round_to_f32(end)
    if steps == 1:
        return [start]
    step = round_to_f32(round_to_f32(end - start) / (steps - 1))
    halfway = steps // 2
    return [round_to_f32(start + step * i) if i < halfway else round_to_f32(end - step * (steps - 1 - i))
            for i in range(steps)]


def _check_weight(self, weight) -> None:
    if weight is None:
        return
    torch._check(weight.dtype == self.dtype, lambda: "torch.histogramdd: if weight tensor is provided, input tensor and "
                 f"weight tensor should have the same dtype, but got input({self.dtype}), and weight({weight.dtype})")
    torch._check(weight.numel() == self.numel(), lambda: "torch.histogramdd: if weight tensor is provided it should have the "
                 f"same shape as the input tensor excluding its innermost dimension, but got input with shape "
                 f"{tuple(self.reshape(-1, 1).shape)} and weight with shape {tuple(weight.reshape(-1).shape)}")


def _counts(self, edges, weight, density: bool):
    """The histogram of self's elements over `edges` (ascending, on the chip)."""
    bins = edges.numel() - 1
    x = self.reshape(-1)
    inside = (x >= edges[0]) & (x <= edges[-1])  # NaN is neither
    at = (torch.searchsorted(edges, x, right=True) - 1).clamp(0, bins - 1)
    w = torch.ones_like(x) if weight is None else weight.reshape(-1)
    hist = torch.zeros(bins, dtype=self.dtype, device=self.device).index_add_(0, at, torch.where(inside, w, 0))
    if density:
        hist = hist / hist.sum() / edges.diff()
    return hist


def histogram_bin_ct(self, bins: int = 100, *, range=None, weight=None, density: bool = False):
    if self.dtype != torch.float32:
        return run_on_cpu("histogram.bin_ct", f"{self.dtype} (the chip's histogram serves float32)", self, bins,
                          range=range, weight=weight, density=density)
    torch._check(bins > 0, lambda: f"torch.histogram(): bins must be > 0, but got {bins} for dimension 0")
    _check_weight(self, weight)
    if range is not None:
        torch._check(len(range) == 2, lambda: f"torch.histogramdd: for a 1-dimensional histogram range should have 2 elements, "
                     f"but got {len(range)}")
        left, right = float(range[0]), float(range[1])
    elif self.numel() > 0:
        left, right = (float(v) for v in torch.aminmax(self.reshape(-1)))
    else:
        left, right = 0.0, 1.0
    torch._check(math.isfinite(left) and math.isfinite(right),
                 lambda: f"torch.histogramdd: dimension 0's range [{left:g}, {right:g}] is not finite")
    torch._check(left <= right, lambda: f"torch.histogramdd: min should not exceed max, but got min {left:g} max {right:g} "
                 "for dimension 0")
    if left == right:  # an empty range widened, as numpy's
        left, right = left - 0.5, right + 0.5
    edges = torch.tensor(_linspace_f32(left, right, bins + 1), dtype=torch.float32).to(self.device)
    return _counts(self, edges, weight, density), edges


def histogram_bins_tensor(self, bins, *, weight=None, density: bool = False):
    if self.dtype != torch.float32 or bins.dtype != torch.float32:
        return run_on_cpu("histogram.bins_tensor", f"{self.dtype} (the chip's histogram serves float32)", self, bins,
                          weight=weight, density=density)
    torch._check(bins.dim() == 1, lambda: "torch.histogramdd: bins tensor should have one dimension, but got "
                 f"{bins.dim()} dimensions in the bins tensor for dimension 0")
    torch._check(bins.numel() > 0, lambda: "torch.histogramdd: bins tensor should have at least 1 element, but got "
                 f"{bins.numel()} elements in the bins tensor for dimension 0")
    torch._check(bins.numel() > 1, lambda: "torch.histogram(): bins must be > 0, but got 0 for dimension 0")
    _check_weight(self, weight)
    edges = bins.contiguous()
    return _counts(self, edges, weight, density), edges.clone()


register("histogram.bin_ct", histogram_bin_ct, "PrivateUse1")
register("histogram.bins_tensor", histogram_bins_tensor, "PrivateUse1")
