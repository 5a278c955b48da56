"""Antialiased bilinear and bicubic resizing (`interpolate(..., antialias=True)`) computed as the
CPU's kernel computes them.

The CPU (aten/src/ATen/native/cpu/UpSampleKernel.cpp, separable_upsample_generic_Nd_kernel_impl)
resizes one dim at a time, the last first, skipping dims whose size does not change. Along a
dim, output i is the sum over its window of input elements x[xmin + j] * w[j], j = 0 .. xsize - 1
in order, with the window and its normalised weights from _compute_indices_min_size_weights_aa:
a triangle (bilinear) or Keys cubic with a = -0.5 (bicubic) filter stretched by the scale when
downsampling. The windows and weights are made here on the host in the CPU's f32 and double
arithmetic (constants of the shapes, uploaded); each window position is a gather on the chip.
Windows shorter than the longest gather an appended 0 with weight 0, so an infinity or NaN
never meets a zero weight (inf * 0 = NaN) outside the window the CPU reads. The backward is the
gathers' (an accumulating index_put). Registered at the autograd key, like upsample_linear.py.
"""
from __future__ import annotations

import math

import numpy as np
import torch
from torch._prims_common import suggest_memory_format

from .composed_fallback import run_on_cpu
from .python_kernels import register
from .upsample_linear import _ratio

aten = torch.ops.aten
f32 = np.float32


def _triangle(x: np.float32) -> np.float32:
    x = abs(x)
    return f32(1.0) - x if x < 1.0 else f32(0.0)


def _fma(a: np.float32, b: np.float32, c: np.float32) -> np.float32:
    """a * b + c rounded once to f32 (the f32 product is exact in double)."""
    return f32(float(a) * float(b) + float(c))


def _keys_cubic(x: np.float32) -> np.float32:
    """HelperInterpCubic::aa_filter<float> with a = -0.5 (cubic_convolution1 and 2, in f32) as
    the CPU's build computes it: its compiler contracts each multiply-add into a fused one, which
    decides whether a weight next to the filter's zeros is exactly 0 (an infinity times it NaN)
    or a few ulps."""
    a = f32(-0.5)
    x = abs(x)
    if x < 1.0:
        return _fma(_fma(a + f32(2), x, -(a + f32(3))) * x, x, f32(1))
    if x < 2.0:
        return _fma(_fma(_fma(a, x, -(f32(5) * a)), x, f32(8) * a), x, -(f32(4) * a))
    return f32(0.0)


_FILTERS = {"bilinear": (_triangle, 2), "bicubic": (_keys_cubic, 4)}


def _windows(in_size: int, out_size: int, align_corners: bool, scale, mode: str):
    """Per output index along one dim: the source index of each window position and its weight
    ([out, positions] each; positions past a window read index in_size, the appended 0, with
    weight 0), as _compute_index_ranges_weights<float> makes them."""
    filter_fn, interp_size = _FILTERS[mode]
    s = f32(_ratio(in_size, out_size, align_corners, scale).item())
    support = f32(interp_size * 0.5 * float(s)) if s >= 1.0 else f32(interp_size * 0.5)
    positions = int(math.ceil(support)) * 2 + 1
    invscale = f32(1.0 / float(s)) if s >= 1.0 else f32(1.0)
    index = np.full((out_size, positions), in_size, dtype=np.int64)
    weight = np.zeros((out_size, positions), dtype=np.float32)
    with np.errstate(all="ignore"):
        for i in range(out_size):
            center = f32(float(s) * (i + 0.5))
            xmin = max(int(float(center - support) + 0.5), 0)
            xsize = min(max(min(int(float(center + support) + 0.5), in_size) - xmin, 0), positions)
            w = [filter_fn(f32((float(f32(j + xmin) - center) + 0.5) * float(invscale))) for j in range(xsize)]
            total = f32(0.0)
            for v in w:
                total = f32(total + v)
            if total != 0.0:
                w = [f32(v / total) for v in w]
            index[i, :xsize] = np.arange(xmin, xmin + xsize)
            weight[i, :xsize] = w
    return torch.from_numpy(index), torch.from_numpy(weight)


def _resize_dim(x: torch.Tensor, dim: int, out_size: int, align_corners: bool, scale, mode: str) -> torch.Tensor:
    index, weight = _windows(x.shape[dim], out_size, align_corners, scale, mode)
    index, weight = index.t().contiguous().to(x.device), weight.t().contiguous().to(x.device, x.dtype)  # one upload each
    pad = [0, 0] * (x.dim() - 1 - dim) + [0, 1]  # one 0 appended along `dim`
    padded = aten.constant_pad_nd(x, pad, 0.0)
    trailing = [1] * (x.dim() - 1 - dim)
    result = None
    for k in range(index.shape[0]):  # the CPU's order: output = x0 * w0, then += xk * wk
        term = aten.index_select(padded, dim, index[k])
        term = term * weight[k].reshape(out_size, *trailing)
        result = term if result is None else result + term
    return result


def upsample_antialias(input, output_size, align_corners, scales, mode: str):
    op = aten._upsample_bilinear2d_aa.default if mode == "bilinear" else aten._upsample_bicubic2d_aa.default
    if input.dtype == torch.uint8:  # the CPU's uint8 path sums int16 fixed-point weights
        return run_on_cpu(op, "uint8 inputs (the CPU's fixed-point weights)", input, output_size, align_corners, *scales)
    x = input if input.dtype in (torch.float32, torch.float64) else input.float()
    if list(input.shape[2:]) == list(output_size):
        return input.clone()
    for d in reversed(range(len(output_size))):  # the last dim first, as the CPU's passes
        dim = 2 + d
        if x.shape[dim] != output_size[d]:
            x = _resize_dim(x, dim, output_size[d], align_corners, scales[d], mode)
    return x.contiguous(memory_format=suggest_memory_format(input)).to(input.dtype)


def _bilinear2d_aa(input, output_size, align_corners, scales_h=None, scales_w=None):
    return upsample_antialias(input, output_size, align_corners, [scales_h, scales_w], "bilinear")


def _bicubic2d_aa(input, output_size, align_corners, scales_h=None, scales_w=None):
    return upsample_antialias(input, output_size, align_corners, [scales_h, scales_w], "bicubic")


for _name, _kernel in (("_upsample_bilinear2d_aa", _bilinear2d_aa), ("_upsample_bicubic2d_aa", _bicubic2d_aa)):
    register(_name, _kernel, "AutogradPrivateUse1")
    register(_name, _kernel, "PrivateUse1")
