#!/usr/bin/env python3
"""Runs every OpInfo op's first samples on "tpu" and on the CPU in eight passes (float32 forward,
float32 backward, bfloat16, float16, complex64, int64 and int32 forward, float32 with NaN/inf) and writes
docs/opinfo.md: per op and pass native / fallback / mismatch / unsupported / error / crash, with
totals.

Ops run in worker processes; a worker that dies (a crash in the bridge) has its current op
recorded as `crash` and a new worker continues after it, so one bug cannot hide the rest.
Usage: PYTHONPATH=torch_bridge/python:tests/python python3 scripts/opinfo_report.py [docs/opinfo.md]
"""
import collections
import json
import pathlib
import sys

from sweep_workers import run_restartable


# pass name -> (dtype name, backward)
PASSES = {"float32": ("float32", False), "float32 backward": ("float32", True), "bfloat16": ("bfloat16", False),
          "float16": ("float16", False), "complex64": ("complex64", False), "float32 NaN/inf": ("float32", False),
          "int64": ("int64", False), "int32": ("int32", False)}
# Passes whose floating inputs carry NaN, +inf and -inf (opinfo_harness.with_special_values).
SPECIALS = {"float32 NaN/inf"}


def ops_of(pass_name: str) -> list:
    """The OpInfo entries a pass runs: those supporting its dtype on the CPU (and autograd, backward)."""
    import torch
    from torch.testing._internal.common_methods_invocations import op_db

    dtype_name, backward = PASSES[pass_name]
    dtype = getattr(torch, dtype_name)
    return [op for op in op_db if dtype in op.supported_dtypes("cpu") and (not backward or op.supports_autograd)]


def worker(pass_name: str, start: int) -> None:
    """Prints one JSON line per op from index `start` on ("begin" first, so a crash is attributable)."""
    import warnings

    warnings.filterwarnings("ignore")
    import torch

    import vtpu  # noqa: F401
    from opinfo_harness import run_op

    dtype_name, backward = PASSES[pass_name]
    ops = ops_of(pass_name)
    for i in range(start, len(ops)):
        print(json.dumps({"begin": i, "total": len(ops)}), flush=True)
        r = run_op(ops[i], dtype=getattr(torch, dtype_name), backward=backward, specials=pass_name in SPECIALS)
        print(json.dumps({"index": i, "name": r.name, "status": r.status, "counts": r.counts,
                          "problem": r.first_problem}), flush=True)


def sweep(pass_name: str) -> tuple[dict, float]:
    """{op name: result} of one pass, and its seconds."""
    from opinfo_harness import op_name

    results, seconds = run_restartable(__file__, [pass_name], pass_name)
    ops = ops_of(pass_name)
    for i, r in results.items():
        if r["name"] is None:  # crashed: named here
            r["name"] = op_name(ops[i])
    return {r["name"]: r for r in results.values()}, seconds


STATUSES = ("native", "fallback", "mismatch", "unsupported", "error", "crash", "skipped")


def main(out: pathlib.Path) -> None:
    passes = {name: sweep(name) for name in PASSES}
    lines = ["# OpInfo differential report", "",
             "`scripts/opinfo_report.py`: every OpInfo entry runs its first 3 samples on `tpu` (v5e, defer_and_fuse) "
             "and on the CPU in eight passes: **float32** forward (entries that support float32 on the CPU), "
             "**float32 backward** (entries that support autograd: the gradients of a fixed weighted sum of the "
             "outputs with respect to every floating input), **bfloat16** and **float16** forward (the chip holds "
             "float16 as a storage format and computes in f32, as XLA does on TPUs), **complex64** forward (entries "
             "that support complex64 on the CPU; the chip holds a complex value as an (re, im) pair of f32 and "
             "computes on the two planes), **int64** forward (entries that support int64 on the CPU: the bookkeeping "
             "integers of indices, masks and counts, and the integer-only ops the float passes never reach), **int32** "
             "forward (the same for int32, which the chip computes in directly: its wrapping arithmetic, integer "
             "division, powers and shifts), "
             "and **float32 NaN/inf**: the "
             "float32 forward samples with NaN, +inf and -inf written into the first, middle and last elements of "
             "every floating input of 3 or more elements (linalg.eigvals skipped: the CPU's own kernel kills the "
             "process on NaN). Samples are made on the CPU and moved to `tpu` as OpInfo would make them there: "
             "views keep their storage, strides and offset, and tensors OpInfo keeps on the CPU for other devices "
             "(tensor_split's indices) stay there. Results are compared with "
             "atol = rtol = 1e-4 (complex64 too; bfloat16: 1.6e-2, float16: 2e-3), NaN equal to NaN only, except random ops (dropout, normal, "
             "uniform, rand_like, ...: the chip's Philox stream is not the CPU's), whose shapes and dtypes are "
             "compared. Outputs that are not unique are compared through what is: sorting ops' indices through the values "
             "they select, the low-rank SVDs through S and U diag(S) V^H, linalg.eigh (each eigenvector's sign is free) "
             "through its eigenvalues, V diag(w) V^H and V^H V = I, its backward through OpInfo's own |V| "
             "(the sample's output_process_fn_grad). A float32 result (forward, backward or NaN/inf) that misses the "
             "CPU's is judged against the sample computed on the CPU in float64 and rounded to float32: it passes "
             "when it is within tolerance of that and the CPU's own float32 result is not (the CPU's order of "
             "operations amplifying its rounding: matrix_exp's squarings); the notes column says so beside it. "
             "An op's status is its worst sample's: crash > error > unsupported > mismatch > fallback > "
             "native. `native`: every aten op ran on the chip (lowered, or as torch's decomposition into lowered "
             "ops). `fallback`: some aten op needed the CPU (VTPU_CPU_FALLBACK) and the result matched; the column "
             "names those ops. `unsupported`: it failed even with fallback (complex128 and complex32, sparse layouts). "
             "`error`: another exception. `crash`: the process died (the sweep restarts after it). `skipped`: the "
             "CPU itself rejected every sample.", "",
             "| status | " + " | ".join(passes) + " |", "| --- |" + " ---: |" * len(passes)]
    totals = {name: collections.Counter(r["status"] for r in results.values()) for name, (results, _) in passes.items()}
    for status in STATUSES:
        lines.append(f"| {status} | " + " | ".join(str(totals[name].get(status, 0)) for name in passes) + " |")
    counted = {name: sum(totals[name].values()) - totals[name].get("skipped", 0) for name in passes}
    lines.append("| **native share** (of ops not skipped) | " + " | ".join(
        f"**{100 * totals[name].get('native', 0) / max(counted[name], 1):.1f}%**" for name in passes) + " |")
    lines += ["", "Sweep time on this machine: " + ", ".join(f"{name} {seconds:.0f} s" for name, (_, seconds) in
                                                            passes.items()) + ".", "",
              "| op | " + " | ".join(passes) +
              " | first problem of each pass that is not native; float32 results judged against float64 |",
              "| --- |" + " --- |" * (len(passes) + 1)]
    for op in sorted(set().union(*(results for results, _ in passes.values()))):
        cells, problems = [], []
        for name, (results, _) in passes.items():
            r = results.get(op)
            cells.append(r["status"] if r else "-")
            if r and r["problem"]:
                problems.append(f"{name}: " + r["problem"].replace("|", "\\|").replace("\n", " "))
        lines.append(f"| {op} | " + " | ".join(cells) + " | " + "; ".join(problems) + " |")
    out.write_text("\n".join(lines) + "\n")
    print({name: dict(t) for name, t in totals.items()}, f"-> {out}")


if __name__ == "__main__":
    if len(sys.argv) > 3 and sys.argv[1] == "--worker":
        worker(sys.argv[2], int(sys.argv[3]))
    else:
        main(pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "docs/opinfo.md"))
