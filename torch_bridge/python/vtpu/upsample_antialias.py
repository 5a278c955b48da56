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

import torch
from torch._prims_common import suggest_memory_format

from .composed_fallback import run_on_cpu
from .float_bits import round_to_f32 as r32
from .python_kernels import register
from .upsample_linear import _ratio

aten = torch.ops.aten


# Host arithmetic in f32, as the CPU's: each value below is an f32 value held in a Python float,
# every operation rounded back to f32 (r32).
def _triangle(x: float) -> float:
    x = abs(x)
    return r32(1.0 - x) if x < 1.0 else 0.0


def _fma(a: float, b: float, c: float) -> float:
    """a * b + c rounded once to f32 (the f32 product is exact in double)."""
    return r32(a * b + c)


def _keys_cubic(x: float) -> float:
    """HelperInterpCubic::aa_filter<float> with a = -0.5 (cubic_convolution1 and 2, in f32) as
    the CPU's build computes it: its compiler contracts each multiply-add into a fused one, which
    decides whether a weight next to the filter's zeros is exactly 0 (an infinity times it NaN)
    or a few ulps. The constants a + 2, a + 3, 5a, 8a and 4a are exact in f32."""
    a = -0.5
    x = abs(x)
    if x < 1.0:
        return _fma(r32(_fma(a + 2, x, -(a + 3)) * x), x, 1.0)
    if x < 2.0:
        return _fma(_fma(_fma(a, x, -(5 * a)), x, 8 * a), x, -(4 * a))
    return 0.0


_FILTERS = {"bilinear": (_triangle, 2), "bicubic": (_keys_cubic, 4)}


def _windows(in_size: int, out_size: int, align_corners: bool, scale, mode: str):
    """Per output index along one dim: the source index of each window position and its weight
    ([out, positions] each; positions past a window read index in_size, the appended 0, with
    weight 0), as _compute_index_ranges_weights<float> makes them."""
    filter_fn, interp_size = _FILTERS[mode]
    s = _ratio(in_size, out_size, align_corners, scale).item()  # an f32 value
    support = r32(interp_size * 0.5 * s) if s >= 1.0 else interp_size * 0.5
    positions = int(math.ceil(support)) * 2 + 1
    invscale = r32(1.0 / s) if s >= 1.0 else 1.0
    index = [[in_size] * positions for _ in range(out_size)]
    weight = [[0.0] * positions for _ in range(out_size)]
    for i in range(out_size):
        center = r32(s * (i + 0.5))
        xmin = max(int(r32(center - support) + 0.5), 0)
        xsize = min(max(min(int(r32(center + support) + 0.5), in_size) - xmin, 0), positions)
        w = [filter_fn(r32((r32(j + xmin - center) + 0.5) * invscale)) for j in range(xsize)]
        total = 0.0
        for v in w:
            total = r32(total + v)
        if total != 0.0:
            w = [r32(v / total) for v in w]
        index[i][:xsize] = range(xmin, xmin + xsize)
        weight[i][:xsize] = w
    return torch.tensor(index, dtype=torch.int64), torch.tensor(weight, dtype=torch.float32)


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
