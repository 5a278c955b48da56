"""avg_pool3d on the chip as kernel-depth many avg_pool2d's (the lowered pooling takes 2 spatial
dims), like convolution_3d: each depth tap's input slices are folded into the batch and pooled over
height and width; the taps' means are averaged over the taps (count_include_pad), or over the taps
that fall inside the input (without it: the 3-D window's count is the valid depth taps times the
valid 2-D count, the same for every tap). Registered at the autograd key, so nn.AvgPool3d, LPPool3d
and LocalResponseNorm (which pool with avg_pool3d) train through avg_pool2d's backward. ceil_mode
and divisor_override are not composed (they fall back, named). max_pool3d's forward runs as torch's
decomposition; its backward (below) adds each gradient at the position its index names.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .composed_fallback import run_on_cpu

_library = torch.library.Library("aten", "IMPL")


def _triple(v) -> list[int]:
    v = [v] if isinstance(v, int) else list(v)
    return v * 3 if len(v) == 1 else v


def avg_pool3d(input, kernel_size, stride=(), padding=(0,), ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    if ceil_mode or divisor_override is not None:
        why = "ceil_mode" if ceil_mode else "divisor_override"
        return run_on_cpu("avg_pool3d", why, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                          divisor_override)
    kernel = _triple(kernel_size)
    stride = _triple(stride) if len(stride) else kernel
    padding = _triple(padding)
    unbatched = input.dim() == 4
    x = input.unsqueeze(0) if unbatched else input
    depth = x.shape[2]
    if padding[0]:
        x = F.pad(x, [0, 0, 0, 0, padding[0], padding[0]])
    n, c = x.shape[:2]
    out_depth = (depth + 2 * padding[0] - kernel[0]) // stride[0] + 1
    total = None
    for t in range(kernel[0]):
        slices = x[:, :, t:t + (out_depth - 1) * stride[0] + 1:stride[0]]
        folded = slices.transpose(1, 2).reshape(n * out_depth, c, *x.shape[3:])
        y = F.avg_pool2d(folded, kernel[1:], stride[1:], padding[1:], False, count_include_pad)
        total = y if total is None else total + y
    if count_include_pad:
        taps = torch.full((out_depth,), float(kernel[0]))
    else:  # padded depth taps added zeros: divide by the taps inside the input
        start = torch.arange(out_depth) * stride[0] - padding[0]
        taps = (torch.minimum(start + kernel[0], torch.tensor(depth)) - torch.clamp(start, min=0)).float()
    total = total.reshape(n, out_depth, *total.shape[1:])
    out = (total / taps.to(total.device, total.dtype).view(1, -1, 1, 1, 1)).transpose(1, 2).contiguous()
    return out.squeeze(0) if unbatched else out


def max_pool3d_with_indices_backward(grad_output, self, kernel_size, stride, padding, dilation, ceil_mode, indices):
    """Each output's gradient added at its maximum's element: indices are flat within each
    (batch, channel) volume, as torch's."""
    planes = self.shape[:-3].numel()
    grad = torch.zeros(planes, self.shape[-3:].numel(), device=self.device, dtype=grad_output.dtype)
    grad = grad.scatter_add(1, indices.reshape(planes, -1), grad_output.reshape(planes, -1))
    return grad.reshape(self.shape)


_library.impl("avg_pool3d", avg_pool3d, "AutogradPrivateUse1")
_library.impl("max_pool3d_with_indices_backward", max_pool3d_with_indices_backward, "PrivateUse1")
