"""torch.bincount on the chip: the counts (or the weights' sums) are a scatter_add into zeros, in
index order as the CPU adds them. Its length depends on the largest value, so, as on CUDA, the
input's range is found on the chip and read back first (a sync point). Counts are added in f32,
exact below 2^24 per bin; weights other than f32 (the CPU returns float64 for them) fall back,
named.
"""
from __future__ import annotations

import torch

from .composed_fallback import run_on_cpu
from .python_kernels import register


def bincount(self, weights=None, minlength=0):
    if weights is not None and weights.dtype != torch.float32:
        return run_on_cpu("bincount", f"{weights.dtype} weights (the CPU sums them in float64)", self, weights, minlength)
    if self.dim() != 1 or self.is_floating_point() or self.is_complex():
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if weights is not None and weights.shape != self.shape:
        raise RuntimeError("weights should be 1-d and have the same length as input")
    if self.numel() >= 2 ** 24 and weights is None:
        return run_on_cpu("bincount", "2^24 or more values (counts are exact in f32 below that)", self, weights, minlength)
    if self.numel() == 0:
        return torch.zeros(minlength, device=self.device, dtype=torch.float32 if weights is not None else torch.long)
    # the range in f32 (exact below 2^24; a larger value reads as at least 2^24, never smaller)
    as_float = self.float()
    low, high = (float(v) for v in torch.stack([as_float.min(), as_float.max()]).cpu())
    if low < 0:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if high >= 2 ** 24:
        return run_on_cpu("bincount", "values of 2^24 or more", self, weights, minlength)
    length = max(int(high) + 1, minlength)
    added = weights if weights is not None else torch.ones(self.shape, device=self.device)
    sums = torch.zeros(length, device=self.device).scatter_add(0, self.long(), added)
    return sums if weights is not None else sums.long()


register("bincount", bincount, "PrivateUse1")
