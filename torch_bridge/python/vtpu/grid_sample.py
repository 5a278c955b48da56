"""grid_sampler_2d (F.grid_sample on 4-D inputs) as the CPU's kernel computes it, so that NaN and
infinities land where the CPU puts them.

The CPU (aten/src/ATen/native/cpu/GridSamplerKernel.cpp) reads each corner of a sample with a
masked gather, 0 where the corner lies outside the input, and multiplies that value by the
corner's weight: an outside corner adds 0 * w, which is NaN only where the weight is (a NaN grid
coordinate makes the sample NaN). torch's own decomposition instead moves an outside corner to
element (0, 0) with weight 0: an infinity or NaN at (0, 0) then spreads into every sample with an
outside corner (inf * 0), and a NaN coordinate gives 0. Here the outside values are selected
away before the multiply. Coordinates are unnormalised, clamped and reflected as torch's
decomposition does; the bilinear weights are the CPU's (1 - t) and t products. Registered where
torch's decomposition was (autograd_decompositions.py) and below autograd for inference mode.
"""
from __future__ import annotations

import torch

from .python_kernels import register


def _unnormalize(coords, size: int, align_corners: bool):
    """[-1, 1] to [0, size - 1] (align_corners) or [-0.5, size - 0.5]."""
    mul = (size * 0.5 - 0.5) if align_corners else (size * 0.5)
    return coords * mul + (size * 0.5 - 0.5)


def _reflect(coords, twice_low: int, twice_high: int):
    """Reflects coordinates until they fall between low and high (bounds given doubled)."""
    if twice_low == twice_high:
        return torch.zeros_like(coords)
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    distance = (coords - low).abs()
    extra = torch.fmod(distance, span)
    flips = (distance / span).floor()
    return torch.where(torch.fmod(flips, 2) == 0, extra + low, span + low - extra)


def _padded(coords, size: int, padding_mode: int, align_corners: bool):
    """Coordinates after the padding mode: zeros keeps them, border clamps, reflection reflects
    and clamps. The CPU's vectorised clamp takes a NaN coordinate to 0 (an x86 max(NaN, 0) is 0),
    so a NaN coordinate samples the first row or column there, as here."""
    if padding_mode == 0:
        return coords
    if padding_mode == 2:
        coords = _reflect(coords, 0, 2 * (size - 1)) if align_corners else _reflect(coords, -1, 2 * size - 1)
    return torch.clamp(torch.where(coords.isnan(), 0, coords), 0, size - 1)


def grid_sampler_2d(a, grid, interpolation_mode=0, padding_mode=0, align_corners=False):
    torch._check(interpolation_mode in (0, 1, 2), lambda: f"Invalid interpolation mode {interpolation_mode}")
    torch._check(padding_mode in (0, 1, 2), lambda: f"Invalid padding mode {padding_mode}")
    dtype = a.dtype
    if dtype not in (torch.float32, torch.float64):  # f32 math, as the CPU's opmath
        a, grid = a.float(), grid.float()
    n, c, height, width = a.shape
    batch = torch.arange(n, device=a.device).view(n, 1, 1, 1)
    channel = torch.arange(c, device=a.device).view(1, c, 1, 1)

    def value(ix, iy):
        """a at integer positions ix, iy ([N, oH, oW]) for every channel, 0 outside the input."""
        inside = (ix >= 0) & (ix < width) & (iy >= 0) & (iy < height)
        xs = torch.where(inside, ix, 0).long().unsqueeze(1)
        ys = torch.where(inside, iy, 0).long().unsqueeze(1)
        return torch.where(inside.unsqueeze(1), a[batch, channel, ys, xs], 0)

    x, y = grid[..., 0], grid[..., 1]
    if interpolation_mode == 0:  # bilinear
        ix = _padded(_unnormalize(x, width, align_corners), width, padding_mode, align_corners)
        iy = _padded(_unnormalize(y, height, align_corners), height, padding_mode, align_corners)
        x0, y0 = ix.floor(), iy.floor()
        tx, ty = ix - x0, iy - y0
        ex, sy = 1 - tx, 1 - ty
        corners = ((x0, y0, sy * ex), (x0 + 1, y0, sy * tx), (x0, y0 + 1, ty * ex), (x0 + 1, y0 + 1, ty * tx))
        out = None
        for cx, cy, w in corners:
            term = value(cx, cy) * w.unsqueeze(1)
            out = term if out is None else out + term
    elif interpolation_mode == 1:  # nearest
        ix = _padded(_unnormalize(x, width, align_corners), width, padding_mode, align_corners)
        iy = _padded(_unnormalize(y, height, align_corners), height, padding_mode, align_corners)
        out = value(ix.round(), iy.round())
    else:  # bicubic: 4 x 4 corners, each clamped or reflected by the padding mode
        ix, iy = _unnormalize(x, width, align_corners), _unnormalize(y, height, align_corners)
        x0, y0 = ix.floor(), iy.floor()
        tx, ty = ix - x0, iy - y0

        def bounded(cx, cy):
            return value(_padded(cx, width, padding_mode, align_corners), _padded(cy, height, padding_mode, align_corners))

        def row(cy):
            return _cubic_interp((bounded(x0 - 1, cy), bounded(x0, cy), bounded(x0 + 1, cy), bounded(x0 + 2, cy)), tx)

        out = _cubic_interp(tuple(row(y0 + k - 1) for k in range(4)), ty)
    return out.to(dtype)


def _cubic_interp(values, t):
    """Bicubic convolution (A = -0.75) of four values at fraction t ([N, oH, oW])."""
    a = -0.75
    near = lambda s: ((a + 2) * s - (a + 3)) * s * s + 1  # noqa: E731
    far = lambda s: ((a * s - 5 * a) * s + 8 * a) * s - 4 * a  # noqa: E731
    coefficients = (far(t + 1), near(t), near(1 - t), far(2 - t))
    out = None
    for v, w in zip(values, coefficients):
        term = v * w.unsqueeze(1)
        out = term if out is None else out + term
    return out


register("grid_sampler_2d", grid_sampler_2d, "PrivateUse1")
