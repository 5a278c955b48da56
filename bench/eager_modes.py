"""strict_eager vs defer_and_fuse on the same workload, measured in one run.

Workload: two pre-norm transformer blocks (examples/demo_model.Block, random weights), batch 2 x
64 tokens x 128 dims, forward + backward (loss = mean(out^2)). Ops not lowered yet run on the CPU
(VTPU_CPU_FALLBACK is switched on here and their count printed): simulated time covers the ops
that ran on the chip. Prints, side by side:
  - simulated device time and peak HBM of each mode, and the ratios (target: defer >= 1.5x
    faster, lower peak HBM), with the peak of the VMEM a flush holds its intermediates in beside
    it (defer's intermediates live there instead of HBM: the peak of both together is compared
    too);
  - host wall time of each mode against native PyTorch CPU eager;
  - host overhead per eager op: a tiny tensor add, us/op, vtpu (strict) vs native CPU;
  - simulated time by kind of kernel (matmuls, layout copies, row kernels, elementwise) in both
    modes: what fusion can and cannot shorten.
Usage: PYTHONPATH=torch_bridge/python python3 bench/eager_modes.py
"""
import pathlib
import sys
import time

import torch

import vtpu

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "examples"))
from demo_model import Block  # noqa: E402


def step(model, x, backward=True):
    if not backward:
        with torch.no_grad():
            return model(x).square().mean(-1).mean(-1).sum(-1)
    loss = model(x).square().mean()
    loss.backward()
    return loss


def run_mode(mode, model_cpu, x_cpu, backward=True):
    vtpu.set_mode(mode)
    model = model_cpu.to("tpu")
    x = x_cpu.to("tpu")
    vtpu.synchronize()
    step(model, x, backward).item()  # warm: fills the program cache (compile time is not what we compare)
    model.zero_grad(set_to_none=True)
    vtpu.synchronize()
    torch.tpu.reset_peak_memory_stats()
    base = torch.tpu.memory_allocated()
    vtpu.reset_stats()
    start = time.perf_counter()
    loss = step(model, x, backward).item()
    vtpu.synchronize()
    wall = time.perf_counter() - start
    stats = vtpu.stats()
    peak = torch.tpu.max_memory_allocated() - base
    stats["held_vmem_peak"] = stats["memory"][0]["held_vmem_peak_bytes"]
    stats["combined_peak"] = stats["memory"][0]["peak_combined_bytes"] - base
    model.zero_grad(set_to_none=True)
    return loss, wall, stats, peak


MATMULS = ("mm", "bmm", "addmm", "matmul")
ROW_OPS = ("sum", "mean", "amax", "amin", "max", "min", "var", "std", "softmax", "log_softmax", "layer_norm", "rms_norm")
LAYOUT = ("contiguous", "permute_for_reduction", "cat", "expand", "index_select", "embedding")


def kind_of(label):
    """The kind of kernel a fused label ran as: its first node for matmuls and layout copies
    (a matmul's epilogue follows it), its last node for row kernels (a prologue precedes it)."""
    nodes = label.split("+")
    if nodes[0] in MATMULS:
        return "matmul (+epilogue)"
    if nodes[0] in LAYOUT:
        return "layout copies"
    if nodes[-1] in ROW_OPS:
        return "row kernels"
    return "elementwise"


def time_by_kind(stats, clock_hz):
    """Simulated microseconds per kind of kernel, from vtpu.stats()["per_kernel"]."""
    out = {}
    for label, p in stats["per_kernel"].items():
        out[kind_of(label)] = out.get(kind_of(label), 0.0) + p["cycles"] / clock_hz * 1e6
    return out


def per_op_overhead(device, n=2000):
    a = torch.ones(8, device=device)
    b = torch.ones(8, device=device)
    for _ in range(50):
        a + b
    start = time.perf_counter()
    for _ in range(n):
        a + b
    if device == "tpu":
        vtpu.synchronize()
    return (time.perf_counter() - start) / n * 1e6


def main():
    vtpu.set_cpu_fallback(True)
    torch.manual_seed(0)
    model = torch.nn.Sequential(Block(), Block())
    x = torch.randn(2, 64, 128)
    start = time.perf_counter()
    cpu_loss = step(model, x).item()
    cpu_wall = time.perf_counter() - start
    model.zero_grad(set_to_none=True)
    results = {mode: run_mode(mode, model, x) for mode in ("strict_eager", "defer_and_fuse")}
    print("2 transformer blocks, forward + backward, batch 2 x 64 tokens x 128 dims, "
          f"simulated {vtpu.chip_name()}")
    print(f"{'mode':16} {'loss':>10} {'sim us':>10} {'kernels':>8} {'peak HBM MB':>12} {'held VMEM MB':>13} "
          f"{'host s':>8} {'CPU fallbacks':>14}")
    for mode, (loss, wall, stats, peak) in results.items():
        print(f"{mode:16} {loss:10.6f} {stats['simulated_seconds'] * 1e6:10.1f} {stats['kernels_launched']:8d} "
              f"{peak / 1e6:12.3f} {stats['held_vmem_peak'] / 1e6:13.3f} {wall:8.3f} {stats['cpu_fallback_ops']:14d}")
    print(f"{'native CPU':16} {cpu_loss:10.6f} {'':>10} {'':>8} {'':>12} {cpu_wall:8.3f}")
    (_, s_wall, s_stats, s_peak), (_, d_wall, d_stats, d_peak) = results["strict_eager"], results["defer_and_fuse"]
    print(f"strict / defer: simulated time {s_stats['simulated_seconds'] / d_stats['simulated_seconds']:.2f}x "
          f"(target >= 1.5x), peak HBM {s_peak / max(d_peak, 1):.2f}x (target > 1), peak of HBM and held VMEM "
          f"together {s_stats['combined_peak'] / max(d_stats['combined_peak'], 1):.2f}x "
          f"({s_stats['combined_peak'] / 1e6:.3f} vs {d_stats['combined_peak'] / 1e6:.3f} MB)")
    print(f"defer's intermediates: {d_stats['intermediates_held']} held in VMEM, {d_stats['intermediates_in_hbm']} in HBM; "
          f"strict's: {s_stats['intermediates_held']} held (only inside one op's kernels)")
    print(f"host wall time vs native CPU eager: strict {s_wall / cpu_wall:.1f}x, defer {d_wall / cpu_wall:.1f}x")
    fwd = {mode: run_mode(mode, model, x, backward=False) for mode in ("strict_eager", "defer_and_fuse")}
    (_, _, fs, fs_peak), (_, _, fd, fd_peak) = fwd["strict_eager"], fwd["defer_and_fuse"]
    print(f"forward only (no fallbacks: {fd['cpu_fallback_ops']}): strict {fs['simulated_seconds'] * 1e6:.1f} us in "
          f"{fs['kernels_launched']} kernels, defer {fd['simulated_seconds'] * 1e6:.1f} us in {fd['kernels_launched']} "
          f"kernels and {fd['flushes']} flush(es): {fs['simulated_seconds'] / fd['simulated_seconds']:.2f}x; "
          f"peak HBM {fs_peak / 1e6:.3f} vs {fd_peak / 1e6:.3f} MB, held VMEM {fs['held_vmem_peak'] / 1e6:.3f} vs "
          f"{fd['held_vmem_peak'] / 1e6:.3f} MB")
    # Where the simulated time goes: fusion shrinks the elementwise and row kernels' share (and
    # drops whole launches); every kind gets cheaper in defer where it reads or writes a flush's
    # intermediates, which stay in held VMEM instead of making an HBM round trip.
    clock_hz = s_stats["simulated_cycles"] / s_stats["simulated_seconds"]
    s_kinds, d_kinds = time_by_kind(s_stats, clock_hz), time_by_kind(d_stats, clock_hz)
    print("forward + backward, simulated us by kind of kernel (strict -> defer):")
    for kind in sorted(set(s_kinds) | set(d_kinds), key=lambda k: -s_kinds.get(k, 0)):
        print(f"  {kind:20} {s_kinds.get(kind, 0):8.1f} -> {d_kinds.get(kind, 0):8.1f}")
    fallbacks = ", ".join(f"{k} x{v}" for k, v in sorted(d_stats["cpu_fallbacks"].items()))
    print(f"ops on the CPU (not lowered yet): {fallbacks}")
    vtpu.set_mode("strict_eager")
    tpu_us, cpu_us = per_op_overhead("tpu"), per_op_overhead("cpu")
    print(f"per eager op (8-element add): vtpu strict {tpu_us:.1f} us, native CPU {cpu_us:.1f} us, "
          f"ratio {tpu_us / cpu_us:.0f}x")


if __name__ == "__main__":
    main()
