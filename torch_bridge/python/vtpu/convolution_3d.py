"""conv3d on the chip as kernel-depth many conv2d's (the lowered convolution, csrc/aten/convolution.cc,
takes 1 or 2 spatial dims): for each depth tap k of the kernel, the input's depth slices that tap
reads (start k * dilation, every stride-th) are folded into the batch and convolved with that tap's
2-D weight; the taps' results are summed. The transposed convolution goes the other way: each
input depth slice is transposed-convolved with each tap's 2-D weight, and tap k's results land at
depths id * stride + k * dilation of the uncropped output (zeros between them when strided),
before the padding is cropped. Registered at the autograd key for aten::conv3d and
aten::conv_transpose3d, so nn.Conv3d and nn.ConvTranspose3d train through the 2-D ops' own
backward.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .depth_folding import as_three, batched, fold_depth, unfold_depth
from .python_kernels import register


def _accumulating_in_f32(conv):
    """bf16 and f16 convolutions sum their taps in f32 and round once, as the CPU's (and the MXU's)
    accumulation does: rounding each tap's partial result would drift past bf16's tolerance."""
    def run(input, weight, bias=None, *args):
        low = input.dtype in (torch.bfloat16, torch.float16)
        if not low:
            return conv(input, weight, bias, *args)
        return conv(input.float(), weight.float(), None if bias is None else bias.float(), *args).to(input.dtype)
    return run


def _same_padding(x, weight, dilation):
    """Input padded for padding='same' (the odd remainder on the far side, as torch pads), and the
    symmetric padding left for the convolution."""
    symmetric, extra = [], []
    for d, k in zip(dilation, weight.shape[2:]):
        total = d * (k - 1)
        symmetric.append(total // 2)
        extra.append(total - 2 * (total // 2))
    if any(extra):
        x = F.pad(x, [0, extra[2], 0, extra[1], 0, extra[0]])
    return x, symmetric


@batched
def conv3d(x, weight, bias=None, stride=(1,), padding=(0,), dilation=(1,), groups=1):
    stride, dilation = as_three(stride), as_three(dilation)
    if isinstance(padding, str):
        if padding == "valid":
            padding = [0, 0, 0]
        else:
            x, padding = _same_padding(x, weight, dilation)
    padding = as_three(padding)
    if padding[0]:
        x = F.pad(x, [0, 0, 0, 0, padding[0], padding[0]])
    depth, taps = x.shape[2], weight.shape[2]
    out_depth = (depth - dilation[0] * (taps - 1) - 1) // stride[0] + 1
    out = None
    for k in range(taps):
        start = k * dilation[0]
        slices = fold_depth(x[:, :, start:start + (out_depth - 1) * stride[0] + 1:stride[0]])
        y = F.conv2d(slices, weight[:, :, k], None, stride[1:], padding[1:], dilation[1:], groups)
        out = y if out is None else out + y
    out = unfold_depth(out, x.shape[0], out_depth).transpose(1, 2)
    if bias is not None:
        out = out + bias.view(1, -1, 1, 1, 1)
    return out.contiguous()


def _at_depths(y, first, stride, total):
    """y ([depth, ...]) placed at depths first, first + stride, ... of a zero tensor of `total`."""
    if stride > 1:
        y = torch.stack([y] + [torch.zeros_like(y)] * (stride - 1), dim=1).flatten(0, 1)[:(y.shape[0] - 1) * stride + 1]
    after = total - first - y.shape[0]
    return torch.cat([y.new_zeros(first, *y.shape[1:]), y, y.new_zeros(after, *y.shape[1:])])


def _cropped(full, padding, output_padding):
    """A transposed convolution's uncropped height and width cut to torch's output: `padding` off
    the near side, and the far side ending output_padding past the cut (zeros where that runs past
    the uncropped result). The 2-D kernel is asked for none of it: its output padding must stay
    below the stride, torch's only below max(stride, dilation)."""
    h, w = full.shape[-2:]
    out_h, out_w = h - 2 * padding[0] + output_padding[0], w - 2 * padding[1] + output_padding[1]
    full = F.pad(full, [0, max(0, padding[1] + out_w - w), 0, max(0, padding[0] + out_h - h)])
    return full[..., padding[0]:padding[0] + out_h, padding[1]:padding[1] + out_w]


@batched
def conv_transpose3d(x, weight, bias=None, stride=(1,), padding=(0,), output_padding=(0,), groups=1, dilation=(1,)):
    stride, padding, dilation = as_three(stride), as_three(padding), as_three(dilation)
    output_padding = as_three(output_padding)
    depth, taps = x.shape[2], weight.shape[2]
    total = (depth - 1) * stride[0] + dilation[0] * (taps - 1) + 1 + output_padding[0]
    slices = fold_depth(x)
    out = None
    for k in range(taps):
        y = _cropped(F.conv_transpose2d(slices, weight[:, :, k], None, stride[1:], 0, 0, groups, dilation[1:]),
                     padding[1:], output_padding[1:])
        y = _at_depths(unfold_depth(y, x.shape[0], depth).transpose(0, 1), k * dilation[0], stride[0], total)
        out = y if out is None else out + y
    out = out[padding[0]:total - padding[0]].permute(1, 2, 0, 3, 4)  # [n, channels, depth, h, w]
    if bias is not None:
        out = out + bias.view(1, -1, 1, 1, 1)
    return out.contiguous()


# Complex-aware: the 2-D convolutions, slices, pads and sums they are made of take complex64 too.
register("conv3d", _accumulating_in_f32(conv3d), "AutogradPrivateUse1", complex_aware=True)
register("conv3d.padding", _accumulating_in_f32(conv3d), "AutogradPrivateUse1", complex_aware=True)
register("conv_transpose3d.input", _accumulating_in_f32(conv_transpose3d), "AutogradPrivateUse1", complex_aware=True)
