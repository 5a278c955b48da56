"""topk by rounds against topk by a stable sort, side by side in one run: simulated time and host
time of torch.topk (largest, k up to 64: k rounds of a row max and a row min, iota.cc) and of the
sort path that larger k take (the first k of torch.sort(descending=True, stable=True)), on v5e in
defer_and_fuse, for rows from a few hundred elements to Llama 3's vocabulary (top-k sampling's
case). Both give the same values and indices (checked here against the CPU's topk).
Usage: PYTHONPATH=torch_bridge/python python3 bench/topk_rounds.py
"""
from __future__ import annotations

import time

import torch

import vtpu


def timed(fn):
    vtpu.synchronize()
    vtpu.reset_stats()
    start = time.perf_counter()
    values, indices = fn()
    values, indices = values.cpu(), indices.cpu()
    return values, indices, vtpu.stats()["simulated_seconds"] * 1e6, time.perf_counter() - start


def main():
    vtpu.set_mode("defer_and_fuse")
    vtpu.set_cpu_fallback(False)
    torch.manual_seed(0)
    print(f"topk (largest) on {vtpu.chip_name()}: rounds (torch.topk) against the first k of a stable sort")
    print(f"{'shape':>14} {'k':>4} {'rounds us':>10} {'sort us':>10} {'sort/rounds':>12} "
          f"{'rounds host s':>14} {'sort host s':>12}")
    for shape in ((8, 256), (64, 1000), (4, 32000), (1, 128256)):
        x = torch.randn(*shape)
        dev = x.to("tpu")
        for k in (16, 50, 64):
            want_values, want_indices = x.topk(k, -1)
            by_rounds = timed(lambda: dev.topk(k, -1))

            def by_sort():
                values, indices = torch.sort(dev, dim=-1, descending=True, stable=True)
                return values[..., :k], indices[..., :k]

            sorted_k = timed(by_sort)
            for values, indices, *_ in (by_rounds, sorted_k):
                assert torch.equal(values, want_values) and torch.equal(indices, want_indices)
            print(f"{str(tuple(shape)):>14} {k:4d} {by_rounds[2]:10.0f} {sorted_k[2]:10.0f} "
                  f"{sorted_k[2] / by_rounds[2]:12.1f} {by_rounds[3]:14.2f} {sorted_k[3]:12.2f}")


if __name__ == "__main__":
    main()
