#!/usr/bin/env python3
"""Simulated time of transposed convolutions on v5e (bf16, timing only), each computed two ways
in one run: as the bridge runs conv_transpose now (one matmul of every input position's window of
contributions, then col2im's sum of the overlaps: kernels/compose/convolution.h) and as the input
gradient of the forward convolution (the same values: a convolution over x dilated by the stride,
which multiplies every weight by the stride's inserted zeros; what conv_transpose ran before).
Prints both times and their ratio.

Usage: PYTHONPATH=torch_bridge/python python3 bench/conv_transpose.py
"""
import torch
import torch.nn.functional as F

import vtpu

# (name, input shape, weight shape, keyword arguments): upsampling layers of common models.
CASES = [
    ("DCGAN generator 4x4 s2", (16, 512, 8, 8), (512, 256, 4, 4), {"stride": 2, "padding": 1}),
    ("U-Net up 2x2 s2", (4, 256, 64, 64), (256, 128, 2, 2), {"stride": 2}),
    ("HiFi-GAN upsampler 1-D k16 s8", (1, 512, 1, 200), (512, 256, 1, 16), {"stride": (1, 8), "padding": (0, 4)}),
    ("3x3 s1 (no inserted zeros)", (4, 64, 32, 32), (64, 64, 3, 3), {"padding": 1}),
    ("GAN to RGB 4x4 s2 (3 channels)", (16, 64, 32, 32), (64, 3, 4, 4), {"stride": 2, "padding": 1}),
]


def simulated(fn) -> float:
    """Simulated seconds of fn() (its result held: defer_and_fuse drops work nothing reads)."""
    vtpu.synchronize()
    vtpu.reset_stats()
    result = fn()  # noqa: F841
    vtpu.synchronize()
    return vtpu.stats()["simulated_seconds"]


def as_transposed(x, w, kw):
    return lambda: F.conv_transpose2d(x, w, **kw)


def as_input_gradient(x, w, kw, out_shape):
    """conv_transpose2d(x, w) as the gradient of conv2d(y, w) with respect to y (y of out_shape),
    given x as the output gradient: the formulation the bridge used before."""
    def run():
        y = torch.zeros(out_shape, dtype=x.dtype, device=x.device, requires_grad=True)
        return torch.autograd.grad(F.conv2d(y, w, **{k: v for k, v in kw.items() if k != "output_padding"}), y, x)
    return run


def main() -> None:
    torch.manual_seed(0)
    print(f"{'layer':32} {'col2im':>12} {'input grad':>12} {'ratio':>7}")
    with vtpu.timing_only():
        for name, xs, ws, kw in CASES:
            x = torch.empty(xs, dtype=torch.bfloat16, device="tpu")
            w = torch.empty(ws, dtype=torch.bfloat16, device="tpu")
            out_shape = F.conv_transpose2d(torch.empty(xs, device="meta"), torch.empty(ws, device="meta"), **kw).shape
            now = simulated(as_transposed(x, w, kw))
            before = simulated(as_input_gradient(x, w, kw, out_shape))
            print(f"{name:32} {now * 1e6:9.1f} us {before * 1e6:9.1f} us {before / now:6.2f}x")


if __name__ == "__main__":
    main()
