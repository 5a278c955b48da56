#!/usr/bin/env python3
"""Simulated time and host time on v5e of vtpu's own compositions of linear upsampling
(vtpu/upsample_linear.py) and grid_sample (vtpu/grid_sample.py) beside torch's decompositions of
the same ops, which vtpu ran before and whose NaN and infinities differ from the CPU's
(docs/faults.md), in both eager modes, and the ratio of the two simulated times. A last row
times a product with an [H, 1] row weight against [N, C, H, W] images, the broadcast that linear
upsampling's weights make (kernels/graph/graph.cc copies such a column to [N, C, H, 1]).

Usage: PYTHONPATH=torch_bridge/python python3 bench/sampling_compositions.py
"""
import time

import torch
import torch.nn.functional as F
from torch._decomp import decomposition_table

import vtpu

aten = torch.ops.aten


def timed(fn) -> tuple[float, float]:
    """Simulated and host seconds of fn() until its result is on the host (after a warm-up call)."""
    fn().cpu()
    vtpu.synchronize()
    vtpu.reset_stats()
    start = time.perf_counter()
    fn().cpu()
    return vtpu.stats()["simulated_seconds"], time.perf_counter() - start


def main() -> None:
    torch.manual_seed(0)
    images = torch.randn(8, 64, 30, 30).to("tpu")
    x, grid = torch.randn(4, 16, 32, 32).to("tpu"), (torch.rand(4, 32, 32, 2) * 2 - 1).to("tpu")
    upsample = decomposition_table[aten.upsample_bilinear2d.default]
    sampler = decomposition_table[aten.grid_sampler_2d.default]
    cases = [("bilinear upsample [8, 64, 30, 30] -> 45 x 45",
              lambda: upsample(images, [45, 45], False), lambda: F.interpolate(images, size=(45, 45), mode="bilinear"))]
    for code, mode in enumerate(("bilinear", "nearest", "bicubic")):
        cases.append((f"grid_sample {mode} [4, 16, 32, 32] at 32 x 32",
                      lambda code=code: sampler(x, grid, code, 0, False),
                      lambda mode=mode: F.grid_sample(x, grid, mode=mode, align_corners=False)))
    print(f"vtpu on {vtpu.chip_name()}: torch's decomposition against vtpu's composition")
    print(f"{'workload':48} {'mode':15} {'torch sim us':>12} {'vtpu sim us':>12} {'ratio':>6} {'torch host s':>12} {'vtpu host s':>11}")
    for mode in ("defer_and_fuse", "strict_eager"):
        vtpu.set_mode(mode)
        for name, theirs, ours in cases:
            (t_sim, t_host), (o_sim, o_host) = timed(theirs), timed(ours)
            print(f"{name:48} {mode:15} {t_sim * 1e6:12.1f} {o_sim * 1e6:12.1f} {o_sim / t_sim:6.2f} {t_host:12.3f} {o_host:11.3f}")
    vtpu.set_mode("defer_and_fuse")
    column = torch.randn(30, 1).to("tpu")
    sim, host = timed(lambda: images * column)
    flat, _ = timed(lambda: images * 2)
    print(f"[8, 64, 30, 30] * [30, 1]: simulated {sim * 1e6:.1f} us, {sim / flat:.2f}x the same product by a scalar")


if __name__ == "__main__":
    main()
