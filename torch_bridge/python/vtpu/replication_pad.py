"""The backward of replication padding on the chip (its forward runs as torch's decomposition, a
gather at clamped positions): each padded dim's gradient is summed back into the element it
copied, with a scatter_add over the same clamped positions, last dim first."""
from __future__ import annotations

import torch
from .python_kernels import register


def replication_pad_backward(grad_output, self, padding):
    if self.numel() == 0:
        return torch.zeros_like(self, dtype=grad_output.dtype)
    grad = grad_output
    for k in range(len(padding) // 2):
        dim = self.dim() - 1 - k
        before, size = padding[2 * k], self.size(dim)
        along = [1] * grad.dim()
        along[dim] = -1
        source = (torch.arange(grad.size(dim), device=self.device) - before).clamp(0, size - 1)
        shape = list(grad.shape)
        shape[dim] = size
        spread = source.view(along).expand(grad.shape).contiguous()
        grad = torch.zeros(shape, device=self.device, dtype=grad.dtype).scatter_add(dim, spread, grad)
    return grad


for _name in ("replication_pad1d_backward", "replication_pad2d_backward", "replication_pad3d_backward"):
    register(_name, replication_pad_backward, "PrivateUse1")
