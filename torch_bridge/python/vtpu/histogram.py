"""torch.histogram and torch.histogramdd on the chip, as torch's CPU kernel computes them (aten/src/ATen/native/Histogram.cpp
and cpu/HistogramKernel.cpp): an element x in [edges[0], edges[-1]] (NaN and the rest skipped)
falls into bin upper_bound(edges, x) - 1, the last bin keeping its right edge, and adds its weight
(1 without weights); density divides by the total and by each bin's width. histogramdd bins
points [M, D] per dim the same way, each point into one cell of the D-dim histogram.

With a bin count, the edges are the CPU's linspace between the range (or the input's minimum and
maximum, synced to the host: torch checks them there too, and so do these), computed on the host
in f32 as its linspace kernel does, so that an element on an edge lands in the CPU's bin.
"""
from __future__ import annotations

import builtins
import functools
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
    # histogram reads both flat; histogramdd's weight has the input's shape but its last dim.
    weight_shape = list(weight.shape) or [1]
    torch._check(weight_shape == list(self.shape[:-1]), lambda: "torch.histogramdd: if weight tensor is provided it "
                 f"should have the same shape as the input tensor excluding its innermost dimension, but got input with shape "
                 f"{tuple(self.shape)} and weight with shape {tuple(weight.shape)}")


def _outer_edges(points, range) -> list[tuple[float, float]]:
    """Each dim's (leftmost, rightmost) edge, checked and an empty range widened, as the CPU's
    select_outer_bin_edges: the range given, else the points' minimum and maximum (on the host)."""
    dims = points.size(1)
    if range is not None:
        torch._check(len(range) == 2 * dims, lambda: f"torch.histogramdd: for a {dims}-dimensional histogram range should "
                     f"have {2 * dims} elements, but got {len(range)}")
        outer = [(float(range[2 * d]), float(range[2 * d + 1])) for d in builtins.range(dims)]
    elif points.numel() > 0:
        low, high = torch.aminmax(points, dim=0)
        outer = list(zip(low.tolist(), high.tolist()))
    else:
        outer = [(0.0, 1.0)] * dims
    for d, (left, right) in enumerate(outer):
        torch._check(math.isfinite(left) and math.isfinite(right),
                     lambda: f"torch.histogramdd: dimension {d}'s range [{left:g}, {right:g}] is not finite")
        torch._check(left <= right, lambda: f"torch.histogramdd: min should not exceed max, but got min {left:g} max "
                     f"{right:g} for dimension {d}")
    return [(left - 0.5, right + 0.5) if left == right else (left, right) for left, right in outer]


def _edges_from_counts(points, bins, range) -> list:
    for d, count in enumerate(bins):
        torch._check(count > 0, lambda: f"torch.histogram(): bins must be > 0, but got {count} for dimension {d}")
    return [torch.tensor(_linspace_f32(left, right, count + 1), dtype=torch.float32).to(points.device)
            for count, (left, right) in zip(bins, _outer_edges(points, range))]


def _counts(points, edges: list, weight, density: bool):
    """The histogram of points [M, D] over each dim's `edges` (ascending, on the chip): a point
    outside any dim's outer edges, or NaN in any, is skipped."""
    shape = [e.numel() - 1 for e in edges]
    inside = torch.ones(points.size(0), dtype=torch.bool, device=points.device)
    flat = torch.zeros(points.size(0), dtype=torch.long, device=points.device)
    for d, e in enumerate(edges):
        x = points[:, d].contiguous()
        inside = inside & (x >= e[0]) & (x <= e[-1])  # NaN is neither
        flat = flat * shape[d] + (torch.searchsorted(e, x, right=True) - 1).clamp(0, shape[d] - 1)
    w = torch.ones(points.size(0), dtype=points.dtype, device=points.device) if weight is None else weight.reshape(-1)
    hist = torch.zeros(math.prod(shape), dtype=points.dtype, device=points.device)
    hist = hist.index_add_(0, flat, torch.where(inside, w, 0)).reshape(shape)
    if density:
        hist = hist / hist.sum()
        for d, e in enumerate(edges):
            hist = hist / e.diff().reshape([-1 if i == d else 1 for i in builtins.range(len(edges))])
    return hist


def histogram_bin_ct(self, bins: int = 100, *, range=None, weight=None, density: bool = False):
    points = self.reshape(-1, 1)
    _check_weight(points, None if weight is None else weight.reshape(-1))
    (edges,) = _edges_from_counts(points, [bins], range)
    return _counts(points, [edges], weight, density), edges


def histogram_bins_tensor(self, bins, *, weight=None, density: bool = False):
    points = self.reshape(-1, 1)
    _check_bin_tensors(points, [bins])
    _check_weight(points, None if weight is None else weight.reshape(-1))
    return _counts(points, [bins.contiguous()], weight, density), bins.clone()


def _check_bin_count(points, bins) -> None:
    torch._check(len(bins) == points.size(1),
                 lambda: "histogramdd: The size of bins must be equal to the innermost dimension of the input.")


def _check_bin_tensors(points, bins) -> None:
    _check_bin_count(points, bins)
    for d, b in enumerate(bins):
        torch._check(b.dtype == points.dtype, lambda: "torch.histogramdd: input tensor and bins tensors should have the same "
                     f"dtype, but got input with dtype {points.dtype} and bins for dimension {d} with dtype {b.dtype}")
        torch._check(b.dim() == 1, lambda: "torch.histogramdd: bins tensor should have one dimension, but got "
                     f"{b.dim()} dimensions in the bins tensor for dimension {d}")
        torch._check(b.numel() > 0, lambda: "torch.histogramdd: bins tensor should have at least 1 element, but got "
                     f"{b.numel()} elements in the bins tensor for dimension {d}")
        torch._check(b.numel() > 1, lambda: f"torch.histogram(): bins must be > 0, but got 0 for dimension {d}")


def _points(self):
    """self [..., D] as [M, D] points, as torch.histogramdd reads it."""
    torch._check(self.dim() >= 2, lambda: f"torch.histogramdd: input tensor should have at least 2 dimensions, but got {self.dim()}")
    return self.reshape(-1, self.size(-1))


def histogramdd_bin_edges(self, bins, *, range=None, weight=None, density: bool = False):
    points = _points(self)
    _check_bin_count(points, bins)
    return _edges_from_counts(points, list(bins), range)


def histogramdd_from_bin_cts(self, bins, *, range=None, weight=None, density: bool = False):
    points = _points(self)
    _check_bin_count(points, bins)
    edges = _edges_from_counts(points, list(bins), range)
    _check_weight(self, weight)
    return _counts(points, edges, weight, density)


def histogramdd_from_bin_tensors(self, bins, *, weight=None, density: bool = False):
    points = _points(self)
    _check_bin_tensors(points, list(bins))
    _check_weight(self, weight)
    return _counts(points, [b.contiguous() for b in bins], weight, density)


def _float32_on_chip(op: str, fn):
    """fn as aten `op`'s kernel for float32 input; other dtypes run `op` on the CPU, named."""
    @functools.wraps(fn)
    def kernel(self, *args, **kwargs):
        if self.dtype != torch.float32:
            return run_on_cpu(op, f"{self.dtype} (the chip's histogram serves float32)", self, *args, **kwargs)
        return fn(self, *args, **kwargs)
    return kernel


for _op, _fn in (("histogram.bin_ct", histogram_bin_ct), ("histogram.bins_tensor", histogram_bins_tensor),
                 ("_histogramdd_bin_edges", histogramdd_bin_edges), ("_histogramdd_from_bin_cts", histogramdd_from_bin_cts),
                 ("_histogramdd_from_bin_tensors", histogramdd_from_bin_tensors)):
    register(_op, _float32_on_chip(_op, _fn), "PrivateUse1")
