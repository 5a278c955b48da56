"""Linear, bilinear and trilinear upsampling computed as the CPU's kernel computes them, so that
infinities and NaN land where the CPU puts them.

The CPU (aten/src/ATen/native/UpSample.h, compute_source_index_and_lambda; UpSampleKernel.cpp)
reads, along each dim, two source elements x0 and x1 with weights w0 = 1 - t and w1 = t and sums
x0 * w0 + x1 * w1, the last dim innermost. At the upper edge x1 is x0 itself, and where input and
output sizes are equal it copies: x1 = x0 with w1 = 0. torch's own decomposition writes the same
value as x0 + (x1 - x0) * t and reads x[i + 1] in the copy: equal for finite values, but an
infinity gives NaN there (inf - inf) where the CPU gives the infinity, and a neighbour's infinity
reaches an output the CPU copies. Source positions and weights are made on the host in the CPU's
arithmetic (a constant of the shapes, uploaded); the corners are gathers on the chip, whose
backward is an accumulating index_put (a scatter-add). Registered at the autograd key, like the
other upsampling decompositions (autograd_decompositions.py), and below it for inference mode.
"""
from __future__ import annotations

from itertools import product

import torch
from torch._prims_common import suggest_memory_format

from .python_kernels import register

aten = torch.ops.aten


def _ratio(in_size: int, out_size: int, align_corners: bool, scale) -> torch.Tensor:
    """area_pixel_compute_scale in f32: (in - 1) / (out - 1), 1 / scale, or in / out."""
    f32 = lambda v: torch.tensor(v, dtype=torch.float32)  # noqa: E731
    if align_corners:
        return f32(in_size - 1) / f32(out_size - 1) if out_size > 1 else f32(0.0)
    return f32(1.0 / scale) if scale is not None and scale > 0 else f32(in_size) / f32(out_size)


def _positions(in_size: int, out_size: int, align_corners: bool, scale):
    """Per output index along one dim: the two source indices and their weights, as the CPU's
    compute_source_index_and_lambda makes them (the source position in double where its C++
    promotes to double, then f32; the weights in f32)."""
    i = torch.arange(out_size)
    if in_size == out_size:  # the CPU's copy: x0 with weight 1, itself again with weight 0
        return i, i, torch.ones(out_size), torch.zeros(out_size)
    ratio = _ratio(in_size, out_size, align_corners, scale)
    if align_corners:
        real = ratio * i.float()
    else:
        real = (ratio.double() * (i.double() + 0.5) - 0.5).float().clamp(min=0.0)
    x0 = torch.minimum(real.floor().long(), torch.tensor(in_size - 1))
    t = (real - x0.float()).clamp(0.0, 1.0)
    x1 = x0 + (x0 < in_size - 1).long()
    return x0, x1, 1.0 - t, t


def upsample_linear(input, output_size, align_corners, scales):
    n_dims = len(output_size)
    x = input if input.dtype in (torch.float32, torch.float64) else input.float()  # f32 math, as the CPU's opmath
    along = []  # per dim: (x0, x1, w0, w1), shaped to broadcast over the dims after it
    for d, (in_size, out_size, scale) in enumerate(zip(input.shape[2:], output_size, scales)):
        trailing = [1] * (n_dims - 1 - d)
        x0, x1, w0, w1 = _positions(in_size, out_size, align_corners, scale)
        along.append([t.to(input.device).reshape(out_size, *trailing) for t in (x0, x1)] +
                     [t.to(input.device, x.dtype).reshape(out_size, *trailing) for t in (w0, w1)])
    corners = [aten._unsafe_index(x, [None, None] + [along[d][c] for d, c in enumerate(choice)])
               for choice in product((0, 1), repeat=n_dims)]
    for d in reversed(range(n_dims)):  # the last dim innermost, as the CPU's nesting
        w0, w1 = along[d][2], along[d][3]
        corners = [v0 * w0 + v1 * w1 for v0, v1 in zip(corners[::2], corners[1::2])]
    result = corners[0].contiguous(memory_format=suggest_memory_format(input))
    if not input.is_floating_point():
        result = result.round()
    return result.to(input.dtype)


def _linear1d(input, output_size, align_corners, scales_w=None):
    return upsample_linear(input, output_size, align_corners, [scales_w])


def _bilinear2d(input, output_size, align_corners, scales_h=None, scales_w=None):
    return upsample_linear(input, output_size, align_corners, [scales_h, scales_w])


def _trilinear3d(input, output_size, align_corners, scales_d=None, scales_h=None, scales_w=None):
    return upsample_linear(input, output_size, align_corners, [scales_d, scales_h, scales_w])


for _name, _kernel in (("upsample_linear1d", _linear1d), ("upsample_bilinear2d", _bilinear2d),
                       ("upsample_trilinear3d", _trilinear3d)):
    register(_name, _kernel, "AutogradPrivateUse1")
    register(_name, _kernel, "PrivateUse1")
