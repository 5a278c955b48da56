"""A Linear's weight as it lies ([N, K], `x @ W.T`) against the same product with W given [K, N]
(`x @ W`), bf16, timing only, one process per chip preset: simulated milliseconds, their ratio
and the share of the chip's bf16 peak. A real MXU takes a transposed weight at no extra cost (the
Pallas TPU guide's fused RHS-transpose matmul: 6.108 vs 6.099 ms on v5e,
../shared/REFERENCES.md). The last two shapes are wide MLPs' down projections, whose K is split
into launches that keep the largest blocks (kernels/compose/long_k_matmul.h).

    python3 bench/linear_layouts.py
"""
from __future__ import annotations

import json
import sys

from chip_processes import json_lines, preset, run_worker

SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (5120, 6656, 6656), (5120, 6656, 17920),  # M, K, N
          (2048, 28672, 8192), (2048, 65536, 8192)]
CHIPS = ["v5e", "v6e", "v7"]


def worker() -> None:
    import torch

    import vtpu

    with vtpu.timing_only():
        for m, k, n in SHAPES:
            x = torch.empty(m, k, dtype=torch.bfloat16, device="tpu")
            w = torch.empty(n, k, dtype=torch.bfloat16, device="tpu")
            w_kn = torch.empty(k, n, dtype=torch.bfloat16, device="tpu")
            seconds = []
            for product in (lambda: x @ w.t(), lambda: x @ w_kn):
                vtpu.synchronize()
                vtpu.reset_stats()
                y = product()  # noqa: F841  (kept: a result nobody reads is never computed)
                vtpu.synchronize()
                seconds.append(vtpu.stats()["simulated_seconds"])
            print(json.dumps([m, k, n, *seconds]), flush=True)


def main() -> None:
    if sys.argv[1:] == ["--worker"]:
        worker()
        return
    print("| chip | M x K x N | x @ W.T ms | x @ W ms | ratio | x @ W.T, share of peak |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for chip in CHIPS:
        peak = preset(chip)["peak_bf16_flops"]["value"]
        for m, k, n, transposed, plain in json_lines(run_worker(__file__, chip)):
            print(f"| {chip} | {m} x {k} x {n} | {transposed * 1e3:.3f} | {plain * 1e3:.3f} | {transposed / plain:.3f} | "
                  f"{100 * 2 * m * k * n / transposed / peak:.0f}% |", flush=True)


if __name__ == "__main__":
    main()
