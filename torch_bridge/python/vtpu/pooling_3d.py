"""avg_pool3d on the chip as two avg_pool2d's (the lowered pooling takes 2 spatial dims): torch
divides each 3-D window's sum by a count that is the product of its per-axis counts (clipped to
the padded input, or to the input without count_include_pad, in ceil_mode too), so the pooling
separates: height and width first, with depth slices folded into the batch, then depth, as the
height of a 2-D pool of width 1. divisor_override: both passes sum, and the override divides once.
Registered at the autograd key, so nn.AvgPool3d, LPPool3d and LocalResponseNorm (which pool with
avg_pool3d) train through avg_pool2d's backward. max_pool3d's forward runs as torch's
decomposition; its backward (below) adds each gradient at the position its index names. Adaptive
3-D pooling takes, for each output depth, its depth range's slices through the 2-D adaptive pool,
then their mean (avg) or their maximum and where it was (max).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .composed_fallback import run_on_cpu
from .depth_folding import as_three, batched, fold_depth, unfold_depth
from .python_kernels import register


@batched
def avg_pool3d(x, kernel_size, stride=(), padding=(0,), ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    if not x.is_floating_point():  # torch divides integer sums with C's integer division, once
        return run_on_cpu("avg_pool3d", "integer inputs (the two passes would truncate twice)", x, kernel_size,
                          stride, padding, ceil_mode, count_include_pad, divisor_override)
    kernel = as_three(kernel_size)
    stride = as_three(stride) if len(stride) else kernel
    padding = as_three(padding)
    n, c, depth = x.shape[:3]
    summed = None if divisor_override is None else 1  # each pass sums; the override divides once
    planes = F.avg_pool2d(fold_depth(x), kernel[1:], stride[1:], padding[1:], ceil_mode, count_include_pad, summed)
    out_h, out_w = planes.shape[-2:]
    # [n * d, c, oh, ow] -> [n * c, 1, d, oh * ow]: depth is the height of a 2-D pool of width 1
    columns = unfold_depth(planes, n, depth).transpose(1, 2).reshape(n * c, 1, depth, out_h * out_w)
    y = F.avg_pool2d(columns, [kernel[0], 1], [stride[0], 1], [padding[0], 0], ceil_mode, count_include_pad, summed)
    y = y.reshape(n, c, y.shape[2], out_h, out_w)
    return y if divisor_override is None else y / divisor_override


def max_pool3d_with_indices_backward(grad_output, self, kernel_size, stride, padding, dilation, ceil_mode, indices):
    """Each output's gradient added at its maximum's element: indices are flat within each
    (batch, channel) volume, as torch's."""
    planes = self.shape[:-3].numel()
    grad = torch.zeros(planes, self.shape[-3:].numel(), device=self.device, dtype=grad_output.dtype)
    grad = grad.scatter_add(1, indices.reshape(planes, -1), grad_output.reshape(planes, -1))
    return grad.reshape(self.shape)


def _depth_ranges(depth, out_depth):
    """torch's adaptive windows: [floor(i * depth / out), ceil((i + 1) * depth / out))."""
    return [(i * depth // out_depth, -(-(i + 1) * depth // out_depth)) for i in range(out_depth)]


def _slab_pooled(x, start, end, pool):
    """pool (a 2-D adaptive pool) over the depth slices start:end of x, as [n, slices, c, h, w]."""
    slab = x[:, :, start:end]
    result = pool(fold_depth(slab))
    unfold = lambda t: unfold_depth(t, x.shape[0], slab.shape[2])  # noqa: E731
    return tuple(map(unfold, result)) if isinstance(result, tuple) else unfold(result)


@batched
def adaptive_avg_pool3d(x, output_size):
    out_depth, size2d = output_size[0], list(output_size[1:])
    pool = lambda t: F.adaptive_avg_pool2d(t, size2d)  # noqa: E731
    return torch.stack([_slab_pooled(x, a, b, pool).mean(1) for a, b in _depth_ranges(x.shape[2], out_depth)], dim=2)


@batched
def adaptive_max_pool3d(x, output_size):
    out_depth, size2d = output_size[0], list(output_size[1:])
    plane = x.shape[3] * x.shape[4]
    if x.shape[2] * plane >= 2 ** 24:  # positions are combined exactly as f32 (int64 tensors do not concatenate)
        return run_on_cpu("adaptive_max_pool3d", "volumes of 2^24 elements or more", x, output_size)
    pool = lambda t: F.adaptive_max_pool2d(t, size2d, return_indices=True)  # noqa: E731
    values, indices = [], []
    for a, b in _depth_ranges(x.shape[2], out_depth):
        slab_values, slab_indices = _slab_pooled(x, a, b, pool)
        best, which = slab_values.max(1)  # the first slice holding the maximum, as the CPU's scan finds it
        values.append(best)
        within = slab_indices.gather(1, which.unsqueeze(1)).squeeze(1)
        indices.append((which + a).float() * plane + within.float())
    return torch.stack(values, dim=2), torch.stack(indices, dim=2).long()


register("avg_pool3d", avg_pool3d, "AutogradPrivateUse1")
register("_adaptive_avg_pool3d", adaptive_avg_pool3d, "AutogradPrivateUse1")
register("adaptive_max_pool3d", adaptive_max_pool3d, "AutogradPrivateUse1")
register("max_pool3d_with_indices_backward", max_pool3d_with_indices_backward, "PrivateUse1")
