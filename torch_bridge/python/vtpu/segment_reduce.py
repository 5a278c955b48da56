"""segment_reduce and its backward on the chip, as the CPU's kernels (SegmentReduce.cpp) compute
them.

Segments run along `axis` (the lengths' or offsets' last dim; their leading dims are data's
before it). Their bounds are read on the host, as the CPU's kernel reads them, and become one
gather: each segment's elements padded to the longest segment with an appended slot holding the
reduction's identity (0, 1, -inf, +inf), then reduced over that padding dim. The initial value
joins each segment's reduction; a mean divides by the length (an empty segment is NaN without an
initial value, the initial value with one). The backward gives each element its segment's
gradient (over the length for a mean); for max and min the elements equal to the result or NaN,
a positive gradient shared among them when several are (the CPU's kernel divides only positive
ones); for prod the gradient times the product of the segment's other elements.
"""
from __future__ import annotations

import math

import torch

from .python_kernels import register

IDENTITY = {"sum": 0.0, "mean": 0.0, "prod": 1.0, "max": float("-inf"), "min": float("inf")}


class _Segments:
    """Per outer index and segment: its start and length along the axis (on the host), and on the
    device the gather that lays data out as [outer, segments, longest, inner] and each element's
    segment, made once per call."""

    def __init__(self, data, lengths, offsets, axis: int, unsafe: bool = True):
        bounds = (offsets if offsets is not None else lengths).contiguous().cpu().long()
        self.axis = axis = bounds.dim() - 1
        self.outer = math.prod(data.shape[:axis])
        self.inner = math.prod(data.shape[axis + 1:])
        self.size = data.shape[axis]
        bounds = bounds.reshape(self.outer, -1)
        if offsets is not None:
            self.starts, self.lengths = bounds[:, :-1], bounds[:, 1:] - bounds[:, :-1]
        else:
            if not unsafe:
                if bounds.numel() and bounds.min() < 0:
                    raise RuntimeError("lengths contains negative value!")
                if not bool((bounds.sum(-1) == self.size).all()):
                    raise RuntimeError("segment_reduce(): Expected all rows of lengths along axis to sum to "
                                       "data.size(lengths.dim()-1) when !unsafe.")
            self.starts, self.lengths = bounds.cumsum(-1) - bounds, bounds
        self.count = self.starts.shape[1]
        self.longest = max(int(self.lengths.max()) if self.lengths.numel() else 0, 1)
        j = torch.arange(self.longest)
        inside = j[None, None] < self.lengths[..., None]
        index = torch.where(inside, self.starts[..., None] + j, torch.full_like(inside, self.size, dtype=torch.long))
        # each element's segment (count where none holds it); both uploaded once, expanded on the device
        segment_of = torch.full((self.outer, self.size + 1), self.count, dtype=torch.long)
        ids = torch.arange(self.count)[None, :, None].expand(self.outer, -1, self.longest)
        segment_of.scatter_(1, index.reshape(self.outer, -1), ids.reshape(self.outer, -1))
        self.index = index.reshape(self.outer, -1, 1).to(data.device)
        self.segment_of = segment_of[:, :self.size, None].to(data.device)
        self.covered = self.segment_of < self.count  # [outer, size, 1]: elements some segment holds
        self.out_shape = list(data.shape[:axis]) + [self.count] + list(data.shape[axis + 1:])

    def laid_out(self, data, fill: float):
        """data as [outer, segments, longest, inner], slots past a segment's end = fill."""
        flat = data.reshape(self.outer, self.size, self.inner)
        padded = torch.cat([flat, flat.new_full((self.outer, 1, self.inner), fill)], 1)
        index = self.index.expand(-1, -1, self.inner)
        return torch.gather(padded, 1, index).reshape(self.outer, self.count, self.longest, self.inner)

    def per_element(self, values):
        """[outer, segments, inner] values spread to data's elements: [outer, size, inner], 0 outside
        every segment."""
        padded = torch.cat([values, values.new_zeros((self.outer, 1, self.inner))], 1)
        return torch.gather(padded, 1, self.segment_of.expand(-1, -1, self.inner))

    def lengths_on(self, device, dtype):
        return self.lengths.to(device, dtype)[..., None]


def _initial(initial, like):
    return None if initial is None else torch.full_like(like, float(initial))


def segment_reduce(data, reduce, *, lengths=None, indices=None, offsets=None, axis=0, unsafe=False, initial=None):
    seg = _Segments(data, lengths, offsets, axis, unsafe)
    laid = seg.laid_out(data, IDENTITY[reduce])
    if reduce in ("sum", "mean"):
        result = laid.sum(2)
    elif reduce == "prod":
        result = laid.prod(2)
    else:
        result = laid.amax(2) if reduce == "max" else laid.amin(2)
    start = _initial(initial, result)
    if start is not None:
        if reduce in ("sum", "mean"):
            result = start + result
        elif reduce == "prod":
            result = start * result
        else:
            extreme = torch.maximum if reduce == "max" else torch.minimum
            result = torch.where(torch.isnan(result), result, extreme(start, result))
    if reduce == "mean":
        count = seg.lengths_on(data.device, data.dtype)
        divided = result / count
        result = torch.where(count > 0, divided, result if start is not None else torch.full_like(result, float("nan")))
    return result.reshape(seg.out_shape)


def segment_reduce_backward(grad, output, data, reduce, *, lengths=None, offsets=None, axis=0, initial=None):
    seg = _Segments(data, lengths, offsets, axis)
    shape = (seg.outer, seg.count, seg.inner)
    grad, output = grad.reshape(shape), output.reshape(shape)
    flat = data.reshape(seg.outer, seg.size, seg.inner)
    covered = seg.covered
    if reduce == "sum":
        result = seg.per_element(grad)
    elif reduce == "mean":
        result = seg.per_element(grad / seg.lengths_on(data.device, data.dtype))
    elif reduce in ("max", "min"):
        chosen = covered & (torch.isnan(flat) | (flat == seg.per_element(output)))
        picked = torch.where(chosen, seg.per_element(grad), torch.zeros_like(flat))
        counts = seg.per_element(seg.laid_out(chosen.to(data.dtype).reshape(data.shape), 0.0).sum(2))
        result = torch.where((counts >= 2) & (picked > 0), picked / counts, picked)
    else:  # prod
        laid = seg.laid_out(data, 1.0)
        before = torch.cumprod(torch.cat([torch.ones_like(laid[:, :, :1]), laid[:, :, :-1]], 2), 2)
        after = torch.cumprod(torch.cat([torch.ones_like(laid[:, :, :1]), laid.flip(2)[:, :, :-1]], 2), 2).flip(2)
        others = before * after * (1.0 if initial is None else float(initial))
        index = seg.index.expand(-1, -1, seg.inner)
        exclusive = torch.zeros(seg.outer, seg.size + 1, seg.inner, dtype=data.dtype, device=data.device)
        exclusive = exclusive.scatter(1, index, others.reshape(seg.outer, -1, seg.inner))[:, :seg.size]
        direct = seg.per_element(grad * output) / flat
        result = torch.where(torch.isnan(flat) | (flat == 0), seg.per_element(grad) * exclusive, direct)
    return torch.where(covered, result, torch.zeros_like(result)).reshape(data.shape)


register("segment_reduce", segment_reduce, "PrivateUse1")
register("_segment_reduce_backward", segment_reduce_backward, "PrivateUse1")
