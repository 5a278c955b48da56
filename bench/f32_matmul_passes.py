#!/usr/bin/env python3
"""Simulated cycles of float32 matmuls on v5e at each torch float32 matmul precision ('highest': 6
MXU passes, 'high': 3, 'medium': 1) beside the same matmul in bfloat16 (one pass), and the ratio
of each to bfloat16. The multi-pass kernels split f32 operands into bf16 parts on the vector unit;
every pass but the leading one multiplies the operands' finite forms so infinities and NaN
propagate as the CPU's f32 GEMM (kernels/codegen/bf16_parts.h), which costs one more stored
weight part (made and loaded per K slice) and the LHS rows' finite form, stored once per K slice
by the leading pass (four vector instructions per vreg). Run it against two builds to compare
them (docs/faults.md).

Usage: PYTHONPATH=torch_bridge/python python3 bench/f32_matmul_passes.py
"""
import torch

import vtpu

SHAPES = [(256, 256, 256), (1024, 1024, 1024), (2048, 2048, 2048), (8, 4096, 1024)]


def cycles(m: int, n: int, k: int, dtype: torch.dtype) -> int:
    a = torch.randn(m, k, device="tpu", dtype=dtype)
    b = torch.randn(k, n, device="tpu", dtype=dtype)
    vtpu.synchronize()
    vtpu.reset_stats()
    a @ b
    vtpu.synchronize()
    return vtpu.stats()["simulated_cycles"]


def main() -> None:
    vtpu.set_mode("strict_eager")
    torch.manual_seed(0)
    print(f"chip {vtpu.chip_name()}: simulated cycles of one matmul, and the ratio to bfloat16\n")
    print("| M x N x K | bfloat16 | f32 'medium' | f32 'high' | f32 'highest' |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for m, n, k in SHAPES:
        bf16 = cycles(m, n, k, torch.bfloat16)
        row = [f"{bf16}"]
        for precision in ("medium", "high", "highest"):
            torch.set_float32_matmul_precision(precision)
            c = cycles(m, n, k, torch.float32)
            row.append(f"{c} ({c / bf16:.2f}x)")
        torch.set_float32_matmul_precision("highest")
        print(f"| {m}x{n}x{k} | " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
