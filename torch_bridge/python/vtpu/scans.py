"""Scans whose combining step is not a sum (the MXU's triangular matmul serves cumsum and cumprod):
cummax, cummin and logcumsumexp, as doubling (Hillis-Steele) scans. Step k combines every element
with the running value 2^k positions before it (a shifted copy: a cat of an identity block and a
narrowed view), so a length-n scan is ceil(log2 n) rounds of elementwise ops over the tensor, all
on the chip and fused by defer_and_fuse.

The combining step is associative, so the doubling order gives the left-to-right scan's answer,
exactly (no rounding): (value, index) pairs, the later element winning a tie (torch's >= / <=) and
a NaN always winning over a number, the latest NaN over an earlier one, as torch's CPU loop decides.

logcumsumexp combines with logaddexp (NaN-propagating, -inf its identity, +inf absorbing), in f32
and in another order than the CPU's left-to-right loop (which accumulates in double): values within
an f32 ulp of the CPU's. It is registered at the autograd key, so its gradient is autograd's through
the logaddexp steps, sum over i >= j of g_i exp(x_j - out_i), with no cancelling terms. torch's own
formula (the CPU's) subtracts two exponentiated reverse scans, each the sum of numbers as large
as the input: at OpInfo's magnitudes (|x| up to 1e4) it is much further from the float64
gradient than this one (bench/linalg_accuracy.py and tests/python/test_scans.py measure both).
"""
from __future__ import annotations

import math

import torch

from .python_kernels import register


def _shifted(x, dim, k, fill):
    """x moved k positions later along dim, the first k positions `fill`."""
    head = torch.full_like(x.narrow(dim, 0, k), fill)
    return torch.cat([head, x.narrow(dim, 0, x.size(dim) - k)], dim)


def _doubling(x, dim, fill, combine):
    """The inclusive scan of x along dim under `combine(earlier, later)` (tuples of tensors)."""
    k, n = 1, x[0].size(dim)
    while k < n:
        earlier = tuple(_shifted(t, dim, k, f) for t, f in zip(x, fill))
        x = combine(earlier, x)
        k *= 2
    return x


def _identity(dtype, largest):
    """What every element beats: the lowest value for a max, the highest for a min."""
    if dtype == torch.bool:
        return not largest
    if dtype.is_floating_point:
        return -math.inf if largest else math.inf
    info = torch.iinfo(dtype)
    return info.min if largest else info.max


def _extreme_scan(x, dim, largest):
    dim = dim % max(x.dim(), 1)
    if x.dim() == 0:
        return x.clone(), torch.zeros((), dtype=torch.long, device=x.device)
    shape = [1] * x.dim()
    shape[dim] = x.size(dim)
    index = torch.arange(x.size(dim), device=x.device).reshape(shape).expand(x.shape).contiguous()
    if x.numel() == 0:
        return x.clone(), index

    def combine(earlier, later):
        (v0, i0), (v1, i1) = earlier, later
        beats = v1 >= v0 if largest else v1 <= v0
        if x.is_floating_point():
            beats = v1.isnan() | (~v0.isnan() & beats)
        return torch.where(beats, v1, v0), torch.where(beats, i1, i0)

    return _doubling((x, index), dim, (_identity(x.dtype, largest), 0), combine)


def cummax(x, dim):
    return _extreme_scan(x, dim, True)


def cummin(x, dim):
    return _extreme_scan(x, dim, False)


def logcumsumexp(x, dim):
    dim = dim % max(x.dim(), 1)
    if x.dim() == 0 or x.numel() == 0:
        return x.clone()
    if x.dtype in (torch.bfloat16, torch.float16):  # the CPU accumulates these in f32 and rounds once
        return logcumsumexp(x.float(), dim).to(x.dtype)
    return _doubling((x,), dim, (-math.inf,), lambda earlier, later: (torch.logaddexp(earlier[0], later[0]),))[0]


register("cummax", cummax, "PrivateUse1")
register("cummin", cummin, "PrivateUse1")
# Real only: a complex logcumsumexp's imaginary parts are fixed up to 2 pi, and the CPU's sequential
# combining picks each one's branch by its order, which the doubling scan's order does not follow.
register("logcumsumexp", logcumsumexp, "AutogradPrivateUse1")
register("_logcumsumexp", logcumsumexp, "PrivateUse1")  # where autograd is off (inference_mode)
