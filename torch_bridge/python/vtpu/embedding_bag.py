"""nn.EmbeddingBag / F.embedding_bag on the chip, composed of lowered ops at the autograd key, so
its backward is the backward of those ops (no _embedding_bag_backward is needed):

    rows   = weight[indices] (* per_sample_weights)          a gather
    bag    = searchsorted(offsets, position, right) - 1      which bag each index belongs to
    sum    = zeros(bags + 1, dim).scatter_add(bag, rows)      padding_idx rows go to the extra bag
    mean   = sum / max(count, 1)
    max    = zeros(bags + 1, dim).scatter_reduce(bag, rows, "amax", include_self=False)

Empty bags give zeros, as on the CPU. The auxiliary outputs are what the CPU's mean mode returns
(offset2bag, bag sizes without padding, max_indices as the first maximum's row in max mode).
scale_grad_by_freq and sparse gradients are not composed: those calls run on the CPU through the
fallback, named, where the user allowed it.
"""
from __future__ import annotations

import torch

from .composed_fallback import run_on_cpu
from .python_kernels import register

_SUM, _MEAN, _MAX = 0, 1, 2


def _composable(indices, scale_grad_by_freq, sparse, mode, per_sample_weights) -> str:
    if scale_grad_by_freq:
        return "scale_grad_by_freq"
    if sparse:
        return "sparse gradients"
    if mode == _MAX and indices.numel() >= 2 ** 24:
        return "max mode over 2^24 indices or more (positions are compared in f32)"
    if per_sample_weights is not None and mode != _SUM:
        return "per_sample_weights outside mode='sum'"  # torch rejects it: on the CPU its kernel says why
    return ""


def _bags(indices, offsets, include_last_offset):
    count = offsets.numel() - 1 if include_last_offset else offsets.numel()
    starts = offsets[:count]
    positions = torch.arange(indices.numel(), device=indices.device, dtype=starts.dtype)
    return count, torch.searchsorted(starts, positions, right=True) - 1


def _embedding_bag(weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False, per_sample_weights=None,
                   include_last_offset=False, padding_idx=-1, op="_embedding_bag"):
    why = _composable(indices, scale_grad_by_freq, sparse, mode, per_sample_weights)
    if why:
        return run_on_cpu(op, why, weight, indices, offsets, scale_grad_by_freq, mode, sparse, per_sample_weights,
                          include_last_offset, padding_idx)
    if indices.dim() == 2:  # fixed-size bags: offsets are implied
        offsets = torch.arange(0, indices.numel(), indices.size(1), device=indices.device, dtype=indices.dtype)
        indices = indices.reshape(-1)
    bags, offset2bag = _bags(indices, offsets, include_last_offset)
    if bags == 0 or indices.numel() == 0:
        why = "no bags, or no indices"
        return run_on_cpu(op, why, weight, indices, offsets, scale_grad_by_freq, mode, sparse, per_sample_weights,
                          include_last_offset, padding_idx)
    rows = weight.index_select(0, indices)
    dtype = weight.dtype
    if dtype in (torch.bfloat16, torch.float16):  # summed in f32 and rounded once, as the CPU does
        rows, weight = rows.float(), weight.float()
    if per_sample_weights is not None:
        rows = rows * per_sample_weights.unsqueeze(1)
    # padding_idx entries (and none else) land in an extra bag that is dropped
    target = offset2bag if padding_idx < 0 else torch.where(indices == padding_idx, bags, offset2bag)
    spread = target.unsqueeze(1).expand(-1, weight.size(1))
    counts = torch.zeros(bags + 1, device=weight.device, dtype=weight.dtype).scatter_add(
        0, target, torch.ones_like(target, dtype=weight.dtype))[:bags]
    empty = torch.zeros(bags + 1, weight.size(1), device=weight.device, dtype=weight.dtype)
    if mode == _MAX:
        out = empty.scatter_reduce(0, spread, rows, "amax", include_self=False)[:bags]
        # the first maximum's position in the bag (torch keeps the first), then its row of weight
        positions = torch.arange(indices.numel(), device=weight.device, dtype=weight.dtype).unsqueeze(1)
        first = torch.where(rows == out.index_select(0, target.clamp(max=bags - 1)), positions,
                            torch.full_like(rows, float(indices.numel())))
        first = empty.scatter_reduce(0, spread, first, "amin", include_self=False)[:bags]
        picked = indices.gather(0, first.long().clamp(max=indices.numel() - 1).reshape(-1)).reshape(bags, -1)
        max_indices = torch.where(counts.unsqueeze(1) > 0, picked, 0)
    else:
        out = empty.scatter_add(0, spread, rows)[:bags]
        if mode == _MEAN:
            out = out / counts.clamp(min=1).unsqueeze(1)
        max_indices = counts.long()
    return out.to(dtype), offset2bag, counts.long(), max_indices


def _forward_only(*args):
    return _embedding_bag(*args, op="_embedding_bag_forward_only")


register("_embedding_bag", _embedding_bag, "AutogradPrivateUse1")
register("_embedding_bag_forward_only", _forward_only, "AutogradPrivateUse1")
