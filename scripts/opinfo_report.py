#!/usr/bin/env python3
"""Runs every OpInfo op's first samples (float32) on "tpu" and on the CPU and writes
docs/opinfo.md: per op native / fallback / mismatch / unsupported / error / crash, with totals.

Ops run in worker processes; a worker that dies (a crash in the bridge) has its current op
recorded as `crash` and a new worker continues after it, so one bug cannot hide the rest.
Usage: PYTHONPATH=torch_bridge/python:tests/python python3 scripts/opinfo_report.py [docs/opinfo.md]
"""
import collections
import json
import os
import pathlib
import subprocess
import sys
import time


def worker(start: int) -> None:
    """Prints one JSON line per op from index `start` on ("begin" first, so a crash is attributable)."""
    import warnings

    warnings.filterwarnings("ignore")
    import torch
    from torch.testing._internal.common_methods_invocations import op_db

    import vtpu  # noqa: F401
    from opinfo_harness import run_op

    ops = [op for op in op_db if torch.float32 in op.supported_dtypes("cpu")]
    for i in range(start, len(ops)):
        print(json.dumps({"begin": i, "total": len(ops)}), flush=True)
        r = run_op(ops[i])
        print(json.dumps({"index": i, "name": r.name, "status": r.status, "counts": r.counts,
                          "problem": r.first_problem}), flush=True)


def main(out: pathlib.Path) -> None:
    start_time = time.time()
    results, index, total = {}, 0, None
    while total is None or index < total:
        proc = subprocess.Popen([sys.executable, __file__, "--worker", str(index)], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True, env=os.environ)
        current = index
        for line in proc.stdout:
            msg = json.loads(line)
            if "begin" in msg:
                current, total = msg["begin"], msg["total"]
                if current % 50 == 0:
                    print(f"{current}/{total} ops, {time.time() - start_time:.0f} s", flush=True)
            else:
                results[msg["index"]] = msg
        code = proc.wait()
        if code != 0 and current not in results:
            results[current] = {"index": current, "name": f"(op #{current})", "status": "crash", "counts": {},
                                "problem": f"worker died with exit code {code}"}
        index = max(results) + 1 if results else index + 1
    names = {}
    import torch  # only for the names of crashed ops
    from torch.testing._internal.common_methods_invocations import op_db
    ops = [op for op in op_db if torch.float32 in op.supported_dtypes("cpu")]
    for i, op in enumerate(ops):
        names[i] = op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")
    for i, r in results.items():
        if r["status"] == "crash":
            r["name"] = names[i]
    totals = collections.Counter(r["status"] for r in results.values())
    lines = ["# OpInfo differential report", "",
             f"`scripts/opinfo_report.py`: each of the {total} OpInfo entries that support float32 on the CPU runs its "
             "first 3 float32 samples on `tpu` (v5e, defer_and_fuse) and on the CPU; results are compared with "
             "atol = rtol = 1e-4, except random ops (dropout, normal, uniform, rand_like, ...: the chip's Philox "
             "stream is not the CPU's), whose shapes and dtypes are compared. An op's status is its worst sample's: crash > error > unsupported > mismatch > "
             "fallback > native. `native`: every aten op ran on the chip. `fallback`: some aten op inside needed the "
             "CPU (VTPU_CPU_FALLBACK) and the result matched. `unsupported`: it failed even with fallback (mostly "
             "int64 math, which the chip has no kernels for). `error`: another exception. `crash`: the process died "
             "(a bridge bug; the sweep restarts after it). `skipped`: the CPU itself rejected every sample.", "",
             "| status | ops |", "| --- | ---: |"]
    for s in ("native", "fallback", "mismatch", "unsupported", "error", "crash", "skipped"):
        lines.append(f"| {s} | {totals.get(s, 0)} |")
    lines += ["", f"Sweep time: {time.time() - start_time:.0f} s on this machine.", "",
              "| op | status | samples | first problem |", "| --- | --- | --- | --- |"]
    for r in sorted(results.values(), key=lambda r: r["name"]):
        counts = ", ".join(f"{k} {v}" for k, v in sorted(r["counts"].items()))
        problem = r["problem"].replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {r['name']} | {r['status']} | {counts} | {problem} |")
    out.write_text("\n".join(lines) + "\n")
    print(dict(totals), f"-> {out}")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--worker":
        worker(int(sys.argv[2]))
    else:
        main(pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "docs/opinfo.md"))
