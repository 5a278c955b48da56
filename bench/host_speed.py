"""Host time on `tpu` against the same work on torch's CPU, measured side by side in one run
(issue 22's three workloads; docs/host_speed.md holds the output of one run):
  - GPT-2 small (transformers' GPT2Config(), random weights), forward, batch 1 x 128 tokens,
    defer_and_fuse, no CPU op: the first and the second call against native CPU eager;
  - a bf16 4096^3 matmul (strict_eager) against torch's CPU bf16 and f32 matmuls;
  - the host overhead of one eager op (an 8-element add, strict_eager) against the CPU's.
Each CPU figure is the best of three runs; each tpu figure is one run, first call included where
said. Simulated seconds are printed beside them: host speed must not change what is simulated
(tests/python/test_host_speed_fingerprint.py checks that).
Usage: PYTHONPATH=torch_bridge/python python3 bench/host_speed.py
"""
from __future__ import annotations

import time

import torch

import vtpu
from eager_modes import per_op_overhead  # bench/ is the script's directory


def best_of(fn, reps=3) -> float:
    best = float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def timed_on_tpu(fn) -> tuple[float, float]:
    """Host seconds of fn() until its results are on the host, and the simulated seconds it took."""
    vtpu.synchronize()
    vtpu.reset_stats()
    start = time.perf_counter()
    fn()
    vtpu.synchronize()
    return time.perf_counter() - start, vtpu.stats()["simulated_seconds"]


def gpt2_forward() -> None:
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config()).eval()
    ids = torch.randint(0, model.config.vocab_size, (1, 128))
    with torch.no_grad():
        cpu = best_of(lambda: model(ids).logits)
        expected = model(ids).logits
        vtpu.set_mode("defer_and_fuse")
        model_tpu, ids_tpu = model.to("tpu"), ids.to("tpu")
        got = {}
        calls = []
        for _ in range(2):
            calls.append(timed_on_tpu(lambda: got.update(logits=model_tpu(ids_tpu).logits.cpu())))
    fallbacks = vtpu.stats()["cpu_fallback_ops"]
    err = (got["logits"] - expected).abs().max().item()
    print(f"GPT-2 small forward, 1 x 128 tokens, defer_and_fuse on {vtpu.chip_name()} "
          f"(max |tpu - cpu| {err:.1e}, CPU ops {fallbacks})")
    print(f"  native CPU eager {cpu:.3f} s")
    for i, (host, simulated) in enumerate(calls):
        print(f"  tpu call {i + 1}: {host:.2f} s host = {host / cpu:.1f}x the CPU, {simulated * 1e3:.3f} ms simulated")


def matmul_4096() -> None:
    torch.manual_seed(0)
    a, b = torch.randn(4096, 4096, dtype=torch.bfloat16), torch.randn(4096, 4096, dtype=torch.bfloat16)
    cpu_bf16 = best_of(lambda: a @ b)
    af, bf = a.float(), b.float()
    cpu_f32 = best_of(lambda: af @ bf)
    vtpu.set_mode("strict_eager")
    at, bt = a.to("tpu"), b.to("tpu")
    host, simulated = timed_on_tpu(lambda: (at @ bt).cpu())
    print(f"bf16 4096^3 matmul on {vtpu.chip_name()}: tpu {host:.2f} s host ({simulated * 1e3:.3f} ms simulated); "
          f"CPU bf16 {cpu_bf16:.2f} s, f32 {cpu_f32:.2f} s; tpu / CPU bf16 = {host / cpu_bf16:.1f}x")


def eager_op() -> None:
    vtpu.set_mode("strict_eager")
    cpu = min(per_op_overhead("cpu") for _ in range(3))
    tpu = per_op_overhead("tpu")
    print(f"per eager op (8-element add, strict_eager): tpu {tpu:.1f} us, CPU {cpu:.1f} us, {tpu / cpu:.0f}x")


def main() -> None:
    gpt2_forward()
    matmul_4096()
    eager_op()


if __name__ == "__main__":
    main()
