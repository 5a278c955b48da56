"""grid_sampler_2d and grid_sampler_3d (F.grid_sample on 4-D and 5-D inputs) as the CPU's kernels
compute them, so that NaN and infinities land where the CPU puts them.

The CPU's 2-D kernel (aten/src/ATen/native/cpu/GridSamplerKernel.cpp) reads each corner of a
sample with a masked gather, 0 where the corner lies outside the input, and multiplies that value
by the corner's weight: an outside corner adds 0 * w, which is NaN only where the weight is (a NaN
grid coordinate makes the sample NaN). Its 3-D kernel (GridSampler.cpp) skips outside corners.
torch's own 2-D decomposition instead moves an outside corner to element (0, 0) with weight 0: an
infinity or NaN at (0, 0) then spread into every sample with an outside corner (inf * 0), and a
NaN coordinate gave 0; torch has no 3-D one (it ran on the CPU fallback). Coordinates are
unnormalised, clamped and reflected as torch's decomposition does; the (bi/tri)linear weights are
the CPU's products of (1 - t) and t. grid_sampler_2d is registered where torch's decomposition was
(autograd_decompositions.py, which also serves grid_sampler_3d), and both below autograd for
inference mode.
"""
from __future__ import annotations

from itertools import product

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


def _padded(coords, size: int, padding_mode: int, align_corners: bool, nan_to: float):
    """Coordinates after the padding mode: zeros keeps them, border clamps, reflection reflects
    and clamps. The CPU's clamp takes a NaN coordinate to `nan_to`: 0 in its vectorised 2-D kernel
    (an x86 max(NaN, 0) is 0), size - 1 in its scalar 3-D one (std::min(size - 1, NaN))."""
    if padding_mode == 0:
        return coords
    if padding_mode == 2:
        coords = _reflect(coords, 0, 2 * (size - 1)) if align_corners else _reflect(coords, -1, 2 * size - 1)
    return torch.clamp(torch.where(coords.isnan(), nan_to, coords), 0, size - 1)


def _grid_sampler(a, grid, interpolation_mode, padding_mode, align_corners):
    """Samples a ([N, C, *spatial], 2 or 3 spatial dims) at grid ([N, *out, dims], (x, y[, z]))."""
    torch._check(interpolation_mode in (0, 1, 2), lambda: f"Invalid interpolation mode {interpolation_mode}")
    torch._check(padding_mode in (0, 1, 2), lambda: f"Invalid padding mode {padding_mode}")
    dtype = a.dtype
    if dtype not in (torch.float32, torch.float64):  # f32 math, as the CPU's opmath
        a, grid = a.float(), grid.float()
    n, c, sizes = a.shape[0], a.shape[1], list(a.shape[2:])
    dims = len(sizes)
    volume = dims == 3  # the CPU's scalar 3-D kernel skips outside corners; its 2-D one adds 0 * w
    out_shape = list(grid.shape[1:-1])
    planes = a.reshape(n, c, -1)
    exact = planes.shape[2] <= 2 ** 24  # flat positions computed exactly in f32

    def value(idx, w=None):
        """a at integer positions idx (one [N, *out] tensor per spatial dim) times weight w, for
        every channel: outside the input 0 * w (2-D) or 0 (3-D, skipped)."""
        ok = None
        for i, size in zip(idx, sizes):
            here = (i >= 0) & (i < size)
            ok = here if ok is None else ok & here
        gathered, ok = _gather(planes, [torch.where(ok, i, 0) for i in idx], sizes, exact, out_shape), ok.unsqueeze(1)
        if w is None:
            return torch.where(ok, gathered, 0)
        if volume:
            return torch.where(ok, gathered * w.unsqueeze(1), 0)
        return torch.where(ok, gathered, 0) * w.unsqueeze(1)

    # grid's last dim lists x (the last spatial dim) first: per spatial dim, in a's order.
    coords = [grid[..., dims - 1 - d] for d in range(dims)]
    unnormalized = [_unnormalize(x, size, align_corners) for x, size in zip(coords, sizes)]
    padded = lambda x, size: _padded(x, size, padding_mode, align_corners, size - 1 if volume else 0)  # noqa: E731
    if interpolation_mode == 1:  # nearest
        return value([padded(x, size).round() for x, size in zip(unnormalized, sizes)]).to(dtype)
    if interpolation_mode == 0:  # (bi/tri)linear: the corners' sum, the last dim fastest
        idx = [padded(x, size) for x, size in zip(unnormalized, sizes)]
        low = [i.floor() for i in idx]
        t = [i - f for i, f in zip(idx, low)]
        out = None
        for corner in product((0, 1), repeat=dims):
            w = None
            for d in range(dims):
                wd = t[d] if corner[d] else 1 - t[d]
                w = wd if w is None else w * wd
            piece = value([low[d] + corner[d] for d in range(dims)], w)
            out = piece if out is None else out + piece
        return out.to(dtype)
    # bicubic (2-D only): 4 x 4 corners, each row and column clamped or reflected by the padding
    # mode once
    iy, ix = unnormalized
    y0, x0 = iy.floor(), ix.floor()
    columns = [padded(x0 + k - 1, sizes[1]) for k in range(4)]
    rows = [padded(y0 + k - 1, sizes[0]) for k in range(4)]
    tx = ix - x0
    return _cubic_interp(tuple(_cubic_interp(tuple(value([cy, cx]) for cx in columns), tx) for cy in rows), iy - y0).to(dtype)


def _gather(planes, idx, sizes, exact: bool, out_shape):
    """planes ([N, C, prod(sizes)]) at positions idx (one [N, *out] tensor per spatial dim, inside
    the input), as [N, C, *out]: one gather of each plane at the flat positions, computed in f32
    while they are below 2^24 (int64 arithmetic on the chip is composed of int32 words)."""
    flat = None
    for i, size in zip(idx, sizes):
        i = i if exact else i.long()
        flat = i if flat is None else flat * size + i
    n, c = planes.shape[:2]
    positions = flat.long().reshape(n, 1, -1).expand(n, c, -1)
    return planes.gather(2, positions).reshape(n, c, *out_shape)


def grid_sampler_2d(a, grid, interpolation_mode=0, padding_mode=0, align_corners=False):
    return _grid_sampler(a, grid, interpolation_mode, padding_mode, align_corners)


def grid_sampler_3d(a, grid, interpolation_mode=0, padding_mode=0, align_corners=False):
    torch._check(interpolation_mode != 2, lambda: "grid_sampler(): bicubic interpolation only supports 4D input")
    return _grid_sampler(a, grid, interpolation_mode, padding_mode, align_corners)


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
register("grid_sampler_3d", grid_sampler_3d, "PrivateUse1")
