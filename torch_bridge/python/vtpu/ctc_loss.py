"""The CTC loss (aten::_ctc_loss) and its gradient (aten::_ctc_loss_backward) on the chip, as the
CPU's kernels (aten/src/ATen/native/LossCTC.cpp) compute them.

The forward is the alpha recursion of Graves et al. over the extended target l' (a blank between
and around the labels), one step per time on all batch entries and positions at once:
alpha_t(s) = log(e^(a1 - m) + e^(a2 - m) + e^(a3 - m)) + m + log_probs[t, l'(s)], with a1, a2, a3 the
previous step's alpha at s, s - 1 and (where l'(s - 2) differs from l'(s)) s - 2, m their maximum
(0 when every term is -inf), as the CPU's loop writes it. An entry's steps past its input length
keep its last alpha, so the likelihood reads the step at input_length - 1. The backward runs the
beta recursion the same way down from there and returns the CPU's expression,
exp(log_probs) - exp(log(sum of alpha * beta over the positions of each class) + nll - log_probs),
times the incoming gradient: the gradient with respect to the logits under the log_softmax
that makes log_probs (the CPU's kernel returns exactly that as log_probs' gradient), 0 past each
input length, and 0 for an infinite loss under zero_infinity. The lengths are read on the host,
as the CPU's kernel reads them, and shape the constant index tensors.
"""
from __future__ import annotations

import torch

from .python_kernels import register

aten = torch.ops.aten
NEG_INF = float("-inf")


def _lengths(lengths) -> list[int]:
    return [int(v) for v in (lengths.tolist() if isinstance(lengths, torch.Tensor) else lengths)]


class _Extended:
    """The extended targets l' of every batch entry and what the recursions ask of them ([N, L],
    L = 2 * max target length + 1), on the device."""

    def __init__(self, targets, target_lengths: list[int], blank: int, device):
        n = len(target_lengths)
        longest = max(target_lengths, default=0)
        if targets.dim() == 1:  # concatenated: entry b's labels start at the sum of the lengths before it
            starts = torch.tensor([0] + target_lengths[:-1]).cumsum(0)
            at = (starts[:, None] + torch.arange(max(longest, 1))[None]).clamp(max=max(targets.numel() - 1, 0))
            padded = targets.reshape(-1)[at.reshape(-1).to(targets.device)].reshape(n, -1) if targets.numel() else \
                torch.zeros(n, max(longest, 1), dtype=torch.long, device=device)
        else:
            padded = targets[:, :max(longest, 1)] if targets.size(1) else torch.zeros(n, 1, dtype=torch.long, device=device)
        self.width = 2 * longest + 1
        s = torch.arange(self.width)
        label = padded.to(device, torch.long)[:, ((s - 1).clamp(min=0) // 2).clamp(max=padded.size(1) - 1).to(device)]
        odd = (s % 2 == 1).to(device)
        self.prime = torch.where(odd[None], label, torch.full_like(label, blank))  # l'(s)
        lengths = torch.tensor(target_lengths)
        self.valid = (s[None] <= 2 * lengths[:, None]).to(device)  # s inside the entry's l'
        skip = torch.zeros(n, self.width, dtype=torch.bool, device=device)
        if self.width > 2:
            skip[:, 2:] = self.prime[:, 2:] != self.prime[:, :-2]
        self.skip = skip  # alpha may come from s - 2
        self.last = (2 * lengths).to(device)  # the positions the likelihood reads: 2 tl and 2 tl - 1
        self.has_labels = (lengths > 0).to(device)


def _shift(x, by: int):
    """x[:, s - by] at s (by > 0) or x[:, s + |by|] (by < 0), -inf where that is outside."""
    fill = torch.full_like(x[:, :abs(by)], NEG_INF)
    return torch.cat([fill, x[:, :-by]], 1) if by > 0 else torch.cat([x[:, -by:], fill], 1)


def _log_add3(a1, a2, a3):
    """log(e^a1 + e^a2 + e^a3) as the CPU's loop: shifted by the largest (strict comparisons), 0
    when every term is -inf."""
    m = torch.where(a2 > a1, a2, a1)
    m = torch.where(a3 > m, a3, m)
    m = torch.where(m == NEG_INF, torch.zeros_like(m), m)
    return torch.log(torch.exp(a1 - m) + torch.exp(a2 - m) + torch.exp(a3 - m)) + m


def _gathered(log_probs, ext: _Extended):
    """log_probs[t, b, l'_b(s)]: [T, N, L]."""
    t = log_probs.size(0)
    return torch.gather(log_probs, 2, ext.prime[None].expand(t, -1, -1))


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, zero_infinity=False):
    inputs, labels = _lengths(input_lengths), _lengths(target_lengths)
    device = log_probs.device
    ext = _Extended(targets, labels, blank, device)
    lp = _gathered(log_probs, ext)
    steps = torch.tensor(inputs, device=device)[:, None]
    first = torch.full_like(lp[0], NEG_INF)
    first[:, 0] = lp[0, :, 0]
    if ext.width > 1:
        first[:, 1] = torch.where(ext.has_labels, lp[0, :, 1], first[:, 1])
    alphas = [first]
    for t in range(1, log_probs.size(0)):
        prev = alphas[-1]
        skipped = torch.where(ext.skip, _shift(prev, 2), torch.full_like(prev, NEG_INF))
        new = _log_add3(prev, _shift(prev, 1), skipped) + lp[t]
        new = torch.where(ext.valid, new, torch.full_like(new, NEG_INF))
        alphas.append(torch.where(t < steps, new, prev))
    log_alpha = torch.stack(alphas, 1)  # [N, T, L]
    final = alphas[-1]
    l1 = torch.gather(final, 1, ext.last[:, None])[:, 0]
    l2 = torch.gather(final, 1, (ext.last - 1).clamp(min=0)[:, None])[:, 0]
    m = torch.where(l1 < l2, l2, l1)
    m = torch.where(m == NEG_INF, torch.zeros_like(m), m)
    pair = torch.log(torch.exp(l1 - m) + torch.exp(l2 - m)) + m
    nll = -torch.where(ext.has_labels, pair, final[:, 0])
    return nll, log_alpha


def ctc_loss_backward(grad, log_probs, targets, input_lengths, target_lengths, neg_log_likelihood, log_alpha, blank,
                      zero_infinity=False):
    inputs, labels = _lengths(input_lengths), _lengths(target_lengths)
    device = log_probs.device
    ext = _Extended(targets, labels, blank, device)
    lp = _gathered(log_probs, ext)
    steps = torch.tensor(inputs, device=device)[:, None]
    s = torch.arange(ext.width, device=device)[None]
    starts = (s == ext.last[:, None]) | ((s == ext.last[:, None] - 1) & ext.has_labels[:, None])
    up_skip = torch.cat([ext.skip[:, 2:], torch.zeros_like(ext.skip[:, :2])], 1)  # beta may come from s + 2
    beta = torch.full_like(lp[0], NEG_INF)
    betas = [None] * log_probs.size(0)
    for t in reversed(range(log_probs.size(0))):
        skipped = torch.where(up_skip, _shift(beta, -2), torch.full_like(beta, NEG_INF))
        new = _log_add3(beta, _shift(beta, -1), skipped) + lp[t]
        new = torch.where(t == steps - 1, torch.where(starts, lp[t], torch.full_like(new, NEG_INF)), new)
        new = torch.where(ext.valid & (t < steps), new, torch.full_like(new, NEG_INF))
        betas[t] = beta = new
    ab = log_alpha.transpose(0, 1) + torch.stack(betas)  # [T, N, L]
    classes = log_probs.size(2)
    onehot = ext.prime[..., None] == torch.arange(classes, device=device)  # [N, L, C]
    terms = torch.where(onehot[None], ab[..., None], torch.full_like(ab[..., None], NEG_INF))  # [T, N, L, C]
    m = terms.amax(2)
    m = torch.where(m == NEG_INF, torch.zeros_like(m), m)
    lcab = torch.log(torch.exp(terms - m[:, :, None]).sum(2)) + m  # log of sum of alpha * beta per class
    nll = neg_log_likelihood[None, :, None]
    result = (torch.exp(log_probs) - torch.exp(lcab + nll - log_probs)) * grad[None, :, None]
    keep = torch.arange(log_probs.size(0), device=device)[:, None] < steps[:, 0][None]  # [T, N]
    if zero_infinity:
        keep = keep & (neg_log_likelihood != float("inf"))[None]
    return torch.where(keep[..., None], result, torch.zeros_like(result))


for _overload in ("_ctc_loss.default", "_ctc_loss.Tensor"):
    register(_overload, ctc_loss, "PrivateUse1")
for _overload in ("_ctc_loss_backward.default", "_ctc_loss_backward.Tensor"):
    register(_overload, ctc_loss_backward, "PrivateUse1")
