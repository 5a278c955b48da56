"""Fractional max pooling (2-D and 3-D) on the chip, as the CPU's kernels
(aten/src/ATen/native/FractionalMaxPool2d.cpp, FractionalMaxPool3d.cpp) compute it.

Each plane's window starts along a dim come from its random sample u (the plane's samples are for
W then H in 2-D, T then H then W in 3-D): start[i] = int((i + u) * alpha) - int(u * alpha) with
alpha = (in - pool) / (out - 1), in f32 as the CPU's generate_intervals<float> (a double
computation picks other starts), and the last window ends at the input's end. The windows are
gathered one offset at a time in the CPU's scan order (the last dim innermost); an element
replaces the running maximum when it is larger or NaN, so the index names the first maximum or
the last NaN, as the CPU's. The backward adds each output's gradient at its index (a scatter-add).
"""
from __future__ import annotations

import math
from itertools import product

import torch

from .float_bits import round_to_f32
from .python_kernels import register

aten = torch.ops.aten


def _starts(samples, in_size: int, out_size: int, pool: int):
    """[N, C, out] window starts along one dim from each plane's sample (f32 arithmetic)."""
    last = torch.full((*samples.shape, 1), in_size - pool, dtype=torch.int64, device=samples.device)
    if out_size == 1:
        return last
    alpha = round_to_f32((in_size - pool) / (out_size - 1))  # an f32 division, as the CPU's
    i = torch.arange(out_size - 1, device=samples.device, dtype=torch.float32)
    u = samples.float()[..., None]
    starts = ((i + u) * alpha).to(torch.int64) - (u * alpha).to(torch.int64)
    return torch.cat([starts, last], -1)


def fractional_max_pool(x, kernel_size, output_size, random_samples):
    dims = len(kernel_size)
    unbatched = x.dim() == dims + 1
    if unbatched:
        x, random_samples = x.unsqueeze(0), random_samples.reshape(1, *random_samples.shape[-2:])
    n, c, spatial = x.shape[0], x.shape[1], list(x.shape[2:])
    # The samples' order: W, H in 2-D; T, H, W in 3-D.
    order = [1, 0] if dims == 2 else [0, 1, 2]
    starts = [_starts(random_samples[..., order[d]], spatial[d], output_size[d], kernel_size[d]) for d in range(dims)]
    strides = [math.prod(spatial[d + 1:]) for d in range(dims)]
    flat_input = x.reshape(n, c, -1)
    best = best_index = None
    for offsets in product(*[range(k) for k in kernel_size]):  # the last dim innermost, as the CPU's loops
        index = None
        for d in range(dims):
            at = (starts[d] + offsets[d]) * strides[d]
            shape = [n, c] + [output_size[e] if e == d else 1 for e in range(dims)]
            at = at.reshape(shape)
            index = at if index is None else index + at
        index = index.expand(n, c, *output_size).reshape(n, c, -1)
        value = torch.gather(flat_input, 2, index)
        if best is None:
            best, best_index = value, index
            continue
        take = (value > best) | torch.isnan(value)
        best = torch.where(take, value, best)
        best_index = torch.where(take, index, best_index)
    out_shape = [n, c, *output_size]
    best, best_index = best.reshape(out_shape), best_index.reshape(out_shape)
    if unbatched:
        best, best_index = best[0], best_index[0]
    return best, best_index


def fractional_max_pool_backward(grad_output, x, kernel_size, output_size, indices):
    planes = x.shape[:-len(kernel_size)]
    grad = torch.zeros(*planes, math.prod(x.shape[-len(kernel_size):]), dtype=grad_output.dtype, device=x.device)
    grad = grad.scatter_add(-1, indices.reshape(*planes, -1), grad_output.reshape(*planes, -1))
    return grad.reshape(x.shape)


for _dims in ("2d", "3d"):
    register(f"fractional_max_pool{_dims}", fractional_max_pool, "PrivateUse1")
    register(f"fractional_max_pool{_dims}_backward", fractional_max_pool_backward, "PrivateUse1")
