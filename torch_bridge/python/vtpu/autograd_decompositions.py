"""Ops whose backward has no lowering but whose torch decomposition is made of differentiable ops
that are lowered: on tpu tensors they run as that decomposition above autograd (at the
AutogradPrivateUse1 key), so autograd records the decomposed ops and the backward is theirs (for
upsampling: gathers at computed source positions, whose backward is an accumulating index_put,
a scatter-add on the chip). Below autograd, decompositions.py already serves their forward.
"""
from __future__ import annotations

import torch
from torch._decomp import decomposition_table

_library = torch.library.Library("aten", "IMPL")
aten = torch.ops.aten

_OPS = [
    aten.upsample_nearest1d.default, aten.upsample_nearest2d.default, aten.upsample_nearest3d.default,
    aten._upsample_nearest_exact1d.default, aten._upsample_nearest_exact2d.default,
    aten._upsample_nearest_exact3d.default, aten.upsample_linear1d.default, aten.upsample_bilinear2d.default,
    aten.upsample_bicubic2d.default, aten.upsample_trilinear3d.default,
]


def _register(op) -> None:
    decomposition = decomposition_table[op]
    _library.impl(op._schema.name.split("::")[1] + ("" if op._overloadname == "default" else "." + op._overloadname),
                  lambda *args, **kwargs: decomposition(*args, **kwargs), "AutogradPrivateUse1")


for _op in _OPS:
    _register(_op)
