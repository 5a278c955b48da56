"""nn.MultiMarginLoss and nn.MultiLabelMarginLoss on the chip, composed of lowered ops at the
autograd key (their forward ran as decompositions, their backward had no lowering):

    multi_margin:       sum over classes i != y of w[y] * relu(margin - x[y] + x[i])^p / C
    multilabel_margin:  sum over listed targets j and non-target classes i of relu(1 - x[j] + x[i]) / C

where the targets of a multilabel row are its entries before the first -1 (a class listed twice
counts twice, as the CPU's loop counts it). relu's gradient is 0 at 0, as the CPU's backward
(which counts only positive terms) has it.
"""
from __future__ import annotations

import torch
from .python_kernels import register

_NONE, _MEAN, _SUM = 0, 1, 2  # at::Reduction


def _reduce(loss, reduction):
    return loss if reduction == _NONE else loss.mean() if reduction == _MEAN else loss.sum()


def multi_margin_loss(input, target, p=1, margin=1, weight=None, reduction=_MEAN):
    x = input.reshape(1, -1) if input.dim() <= 1 else input
    y = target.reshape(-1, 1)
    classes = x.shape[1]
    z = margin - x.gather(1, y) + x
    terms = z * z if p == 2 else z
    if weight is not None:
        terms = terms * weight.gather(0, y.reshape(-1)).unsqueeze(1)
    others = torch.arange(classes, device=x.device).unsqueeze(0) != y
    # Selected, not multiplied by a 0/1 mask: as the CPU's loop, a term counts only where z > 0
    # (NaN does not) and the target's own class never does (inf * 0 would be NaN).
    loss = torch.where(others & (z > 0), terms, 0.0).sum(1) / classes
    return _reduce(loss.reshape(target.shape) if input.dim() > 1 else loss.reshape(()), reduction)


def multilabel_margin_loss(input, target, reduction=_MEAN):
    x = input.reshape(1, -1) if input.dim() <= 1 else input
    t = target.reshape(x.shape)
    classes = x.shape[1]
    listed = torch.cumsum((t < 0).float(), dim=1) == 0  # entries before the first -1
    is_target = torch.zeros(x.shape, device=x.device).scatter_add(1, t.clamp(min=0), listed.float()) > 0
    # [row, slot, i]: each listed target entry (a class listed twice counts twice, as on the CPU)
    # against each class i that is not a target
    pairs = listed.unsqueeze(2) & ~is_target.unsqueeze(1)
    z = 1 - x.gather(1, t.clamp(min=0)).unsqueeze(2) + x.unsqueeze(1)
    loss = torch.where(pairs & (z > 0), z, 0.0).sum((1, 2)) / classes  # as multi_margin_loss's
    return _reduce(loss if input.dim() > 1 else loss.reshape(()), reduction)


register("multi_margin_loss", multi_margin_loss, "AutogradPrivateUse1")
register("multilabel_margin_loss", multilabel_margin_loss, "AutogradPrivateUse1")
