"""Elementwise work over tensors larger than one launch can address (a launch sees its buffers
through a 4 GiB window and counts elements in int32) runs as launches over ranges of the flat data
(kernels/graph/window_pieces.h). Timed only here, on v7 (192 GiB of HBM), at the sizes a
full-size model's optimizer step reaches; tests/kernels/test_window_pieces.cc checks the values
the pieces compute."""
import json
import pathlib

import pytest

V7 = json.loads((pathlib.Path(__file__).resolve().parents[2] / "sim" / "presets" / "v7.json").read_text())


def test_elementwise_ops_over_gigabytes_run_in_launches_that_fit_the_window(run_isolated):
    proc = run_isolated("""
        import json, torch, vtpu
        out = {}
        with vtpu.timing_only():
            a = torch.empty(700_000_000, device="tpu")  # 2.8 GB of f32 each: 8.4 GB with the sum
            b = torch.empty(700_000_000, device="tpu")
            for name, make in [("add", lambda: a + b),
                               ("mul", lambda: torch.empty(2**31 + 5000, dtype=torch.bfloat16, device="tpu") * 2)]:
                vtpu.synchronize()
                vtpu.reset_stats()
                result = make()
                vtpu.synchronize()
                s = vtpu.stats()
                out[name] = {"seconds": s["simulated_seconds"], "read": s["hbm_read_bytes"], "written": s["hbm_write_bytes"],
                             "launches": s["per_kernel"][name]["launches"], "kernels": len(s["per_kernel"])}
                del result
        print(json.dumps(out))
    """, VTPU_CHIP="v7")
    assert proc.returncode == 0, proc.stderr[-2000:]
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    sustained = V7["hbm_bandwidth_bytes_per_s"]["value"] * V7["hbm_efficiency"]["value"]
    for name, elements, element_bytes, launches in [("add", 700_000_000, 4, 2), ("mul", 2**31 + 5000, 2, 3)]:
        got = r[name]
        # One kernel, launched over ranges: each input read once, the output written once.
        assert got["kernels"] == 1 and got["launches"] == launches, got
        reads = 2 if name == "add" else 1
        assert got["read"] == reads * elements * element_bytes and got["written"] == elements * element_bytes, got
        # Streaming at HBM's sustained rate bounds the time from below; the pieces cost little more.
        floor = (got["read"] + got["written"]) / sustained
        assert floor <= got["seconds"] < 1.1 * floor, (name, got, floor)


def test_row_ops_over_gigabytes_of_logits_run_in_pieces_of_rows(run_isolated):
    # Cross-entropy's inputs at Llama 3's vocabulary and 8,192 tokens: [8192, 128256] f32 logits
    # (4.2 GB). A row's max and a broadcast subtraction of it (a row kernel, and an elementwise
    # kernel over rows) each run in pieces of rows; one launch would count more than 2^31
    # elements (the program serves rows of 131,072 columns) or overflow the window.
    proc = run_isolated("""
        import json, torch, vtpu
        with vtpu.timing_only():
            logits = torch.empty(8192, 128256, device="tpu")
            vtpu.synchronize()
            vtpu.reset_stats()
            top = logits.amax(-1, keepdim=True)
            shifted = logits - top
            vtpu.synchronize()
            s = vtpu.stats()
        print(json.dumps({"per_kernel": {k: v["launches"] for k, v in s["per_kernel"].items()},
                          "read": s["hbm_read_bytes"], "written": s["hbm_write_bytes"], "seconds": s["simulated_seconds"]}))
    """, VTPU_CHIP="v7")
    assert proc.returncode == 0, proc.stderr[-2000:]
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    logits = 8192 * 128256 * 4
    assert sum(r["per_kernel"].values()) > len(r["per_kernel"]), r  # some kernel ran in pieces
    # The logits read by each kernel, the shifted logits written once: no range twice (beside
    # them, the subtraction reads the 32 KB column of maxima once per block of columns).
    assert 2 * logits <= r["read"] < 2.01 * logits and logits <= r["written"] < logits + 2**20, r
    sustained = V7["hbm_bandwidth_bytes_per_s"]["value"] * V7["hbm_efficiency"]["value"]
    assert r["seconds"] >= (r["read"] + r["written"]) / sustained, r


def test_adamw_steps_a_full_size_embedding_on_the_chip(run_isolated):
    # Llama-3-8B's embedding (128,256 x 4,096 bf16, 1.05 GB): AdamW's multi-tensor update fuses
    # into kernels whose f32 operands exceed one launch's window; it used to fail at the flush.
    proc = run_isolated("""
        import json, torch, vtpu
        with vtpu.timing_only():
            w = torch.nn.Parameter(torch.empty(128256, 4096, dtype=torch.bfloat16, device="tpu"))
            w.grad = torch.empty_like(w)
            opt = torch.optim.AdamW([w], lr=1e-4)  # kept: its moments are outputs of the step
            opt.step()
            vtpu.synchronize()
            s = vtpu.stats()
        print(json.dumps({"read": s["hbm_read_bytes"], "written": s["hbm_write_bytes"], "seconds": s["simulated_seconds"],
                          "fallbacks": s["cpu_fallback_ops"], "launches": s["kernels_launched"],
                          "kernels": len(s["per_kernel"])}))
    """, VTPU_CHIP="v7")
    assert proc.returncode == 0, proc.stderr[-2000:]
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    tensor = 128256 * 4096 * 2
    # The parameter, its gradient and both moments read, the parameter and moments written, on the chip.
    assert r["fallbacks"] == 0
    assert r["read"] >= 4 * tensor and r["written"] >= 3 * tensor, r
    assert r["launches"] > r["kernels"], r  # some kernel ran in pieces
    assert r["seconds"] >= (r["read"] + r["written"]) / (V7["hbm_bandwidth_bytes_per_s"]["value"] * V7["hbm_efficiency"]["value"])
