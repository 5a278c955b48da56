"""Ops whose backward has no lowering but whose torch decomposition is made of differentiable ops
that are lowered: on tpu tensors they run as that decomposition above autograd (at the
AutogradPrivateUse1 key), so autograd records the decomposed ops and the backward is theirs (for
upsampling: gathers at computed source positions, whose backward is an accumulating index_put,
a scatter-add on the chip). Below autograd, decompositions.py already serves their forward.
"""
from __future__ import annotations

import torch
from torch._decomp import decomposition_table
from .grid_sample import grid_sampler_2d, grid_sampler_3d
from .python_kernels import register

aten = torch.ops.aten

_OPS = [
    aten.upsample_nearest1d.default, aten.upsample_nearest2d.default, aten.upsample_nearest3d.default,
    aten._upsample_nearest_exact1d.default, aten._upsample_nearest_exact2d.default,
    aten._upsample_nearest_exact3d.default, aten.upsample_bicubic2d.default,
    # (linear, bilinear and trilinear upsampling: upsample_linear.py, as the CPU computes them)
    aten.grid_sampler_2d.default, aten.grid_sampler_3d.default,  # (sampling at computed positions, like
    # upsampling: grid_sample.py, as the CPU computes it)
    aten.take.default,  # (a gather from the flattened input: its backward an index_put on the first dim)
    aten._weight_norm_interface.default,  # (v * (g / ||v||): nn.utils.weight_norm, wav2vec2's positional conv)
    aten.renorm.default,  # (its own backward takes norms in the CPU's accumulation type, float64, which
    # torch picks for a device it does not know; the decomposition's norms stay in f32, as on an accelerator)
]


class _ZeroGradientFor(torch.autograd.Function):
    """`out` unchanged, with a zero gradient for `other`: what torch's own backward gives an input
    the decomposition does not differentiate through (nearest sampling's grid)."""

    @staticmethod
    def forward(ctx, out, other):
        ctx.shape, ctx.dtype, ctx.device = other.shape, other.dtype, other.device
        return out.view_as(out)

    @staticmethod
    def backward(ctx, grad):
        return grad, torch.zeros(ctx.shape, dtype=ctx.dtype, device=ctx.device)


def _grid_sampler(decomposition):
    def run(input, grid, interpolation_mode, padding_mode, align_corners):
        out = decomposition(input, grid, interpolation_mode, padding_mode, align_corners)
        nearest = interpolation_mode == 1  # rounded positions: no path from the grid to the output
        return _ZeroGradientFor.apply(out, grid) if nearest and grid.requires_grad else out
    return run


def _register(op) -> None:
    samplers = {aten.grid_sampler_2d.default: grid_sampler_2d, aten.grid_sampler_3d.default: grid_sampler_3d}
    if op in samplers:
        register(op, _grid_sampler(samplers[op]), "AutogradPrivateUse1")  # (grid_sample.py: below autograd)
        return
    register(op, decomposition_table[op], "AutogradPrivateUse1", complex_aware=True)  # torch's: any dtype


for _op in _OPS:
    _register(_op)
