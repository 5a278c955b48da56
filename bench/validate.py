"""Simulated time against every published real-TPU measurement in ../shared/REFERENCES.md: XLA's
bf16 matmuls on v5e and v6e, the Pallas TPU guide's blocked matmul on v5e, v6e's HBM copy and the
JAX scaling book's all-gathers over 4 v5e chips. Each workload runs the way a PyTorch user would
write it on `tpu` (timing only: vtpu.timing_only, values are not computed), one process per chip
preset. Prints a Markdown table with the error of each row and their mean and worst; with
--sensitivity, how much each row moves when one modelling assumption of the presets (a parameter
no public source gives) grows by 25%; with --write, writes docs/validation.md with both.

    python3 bench/validate.py [--sensitivity] [--write]
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import tempfile
import time

from chip_processes import json_lines, preset, run_worker

ROOT = pathlib.Path(__file__).resolve().parents[1]

# (chip, workload, argument, published seconds, source)
XLA = "XLA `jnp.matmul`, jax docs/pallas/tpu/matmul.ipynb"
PALLAS = "Pallas TPU matmul guide (jax docs/pallas/tpu/matmul.ipynb)"
RECIPES = "AI-Hypercomputer/tpu-recipes microbenchmarks"
BOOK = "JAX scaling book, sharding.md"
ROWS = [
    ("v5e", "matmul", 8192, 6.047e-3, XLA),
    ("v5e", "matmul", 4096, 0.827e-3, XLA),
    ("v5e", "pallas", (4096, 512, 1024, 1024), 0.889e-3, PALLAS),
    ("v5e", "pallas", (8192, 512, 1024, 1024), 6.099e-3, PALLAS),
    ("v5e", "pallas", (4096, 128, 128, 128), 11.77e-3, PALLAS),
    ("v5e", "pallas", (8192, 128, 128, 128), 91.84e-3, PALLAS),
    ("v5e", "all_gather", 2048 * 8192 * 2, 680e-6, BOOK),
    ("v5e", "all_gather", 256 * 256 * 2, 8e-6, BOOK),
    ("v6e", "matmul", 8192, 1.3288e-3, RECIPES),
    ("v6e", "copy", 16_777_216, 0.04936e-3, RECIPES),
]


def describe(workload: str, arg) -> str:
    if workload == "matmul":
        return f"bf16 {arg}^3 matmul (`x @ w`)"
    if workload == "pallas":
        size, bm, bk, bn = arg
        return f"Pallas blocked matmul {size}^3, blocks {bm}/{bk}/{bn} (`vtpu.pallas`)"
    if workload == "all_gather":
        return f"all-gather of {arg} bytes over an axis of 4 chips (no wraparound)"
    return f"HBM copy of bf16[{arg}] (`x.clone()`), {arg * 2 // 2**20} MiB"


def simulate(workload: str, arg) -> float:
    """Simulated seconds of one workload on this process's chip (run in a worker)."""
    import torch

    import vtpu

    if workload == "all_gather":
        from vtpu.distributed import interconnect

        return interconnect.for_group(4, 4, topology="4", chip=os.environ["VTPU_CHIP"]).all_gather(arg)
    with vtpu.timing_only():
        if workload == "matmul":
            x = torch.empty(arg, arg, dtype=torch.bfloat16, device="tpu")
            run = lambda: x @ x  # noqa: E731
        elif workload == "copy":
            x = torch.empty(arg, dtype=torch.bfloat16, device="tpu")
            run = x.clone
        else:
            sys.path.insert(0, str(ROOT / "examples"))
            from pallas_matmul import blocked_matmul

            size, bm, bk, bn = arg
            x = torch.empty(size, size, dtype=torch.bfloat16, device="tpu")
            f = blocked_matmul(size, size, size, bm, bk, bn, chip=vtpu.chip_name())
            run = lambda: f(x, x)  # noqa: E731
        vtpu.synchronize()
        vtpu.reset_stats()
        result = run()  # noqa: F841  (kept: a result nobody reads is never computed)
        vtpu.synchronize()
        return vtpu.stats()["simulated_seconds"]


def worker(chip: str) -> None:
    for i, (row_chip, workload, arg, _, _) in enumerate(ROWS):
        if row_chip == chip:
            start = time.time()
            print(json.dumps({"row": i, "seconds": simulate(workload, arg), "host": time.time() - start}), flush=True)


# The presets' modelling assumptions that can move these rows (sim/presets/*.json names each as
# "modelling assumption"); hbm_efficiency is v6e's measured copy efficiency, so the copy row is
# not an independent check of it.
ASSUMPTIONS = ["hbm_efficiency", "hbm_latency_ns", "mxu_weight_load_cycles", "mxu_fill_cycles", "issue_width",
               "vld_latency_cycles"]


def preset_with(chip: str, parameter: str | None, factor: float, folder: str) -> str:
    """VTPU_CHIP for `chip` with `parameter` scaled by `factor` (a preset file), or the preset's name."""
    if parameter is None:
        return chip
    edited = preset(chip)
    value = edited[parameter]["value"]
    if isinstance(value, int):
        value = max(1, round(value * factor))
    else:  # an efficiency cannot pass 1
        value = min(1.0, value * factor) if parameter == "hbm_efficiency" else value * factor
    edited[parameter]["value"] = value
    path = pathlib.Path(folder) / f"{chip}-{parameter}.json"
    path.write_text(json.dumps(edited))
    return str(path)


def measure(parameter: str | None = None, factor: float = 1.0) -> list[dict]:
    results = {}
    for chip in sorted({r[0] for r in ROWS}):
        with tempfile.TemporaryDirectory() as folder:
            for r in json_lines(run_worker(__file__, preset_with(chip, parameter, factor, folder), chip)):
                results[r["row"]] = r
    return [results[i] for i in range(len(ROWS))]


def sensitivity(base: list[dict]) -> str:
    """How much each row's simulated time moves when one assumption grows by 25%."""
    lines = ["| assumption (x1.25) | " + " | ".join(f"row {i + 1}" for i in range(len(ROWS))) + " |",
             "| --- |" + " ---: |" * len(ROWS)]
    for parameter in ASSUMPTIONS:
        moved = measure(parameter, 1.25)
        lines.append(f"| {parameter} | " + " | ".join(f"{100 * (m['seconds'] / b['seconds'] - 1):+.1f}%"
                                                        for m, b in zip(moved, base)) + " |")
    return "\n".join(lines)


def table(results: list[dict]) -> str:
    lines = ["| row | chip | workload | published ms | simulated ms | error | source |",
             "| ---: | --- | --- | ---: | ---: | ---: | --- |"]
    errors = []
    for i, ((chip, workload, arg, published, source), r) in enumerate(zip(ROWS, results)):
        error = (r["seconds"] - published) / published
        errors.append(error)
        lines.append(f"| {i + 1} | {chip} | {describe(workload, arg)} | {published * 1e3:.4g} | {r['seconds'] * 1e3:.4g} | "
                     f"{100 * error:+.1f}% | {source} |")
    mean = sum(abs(e) for e in errors) / len(errors)
    worst = max(range(len(errors)), key=lambda i: abs(errors[i]))
    lines.append("")
    on_one_chip = [abs(e) for e, row in zip(errors, ROWS) if row[1] != "all_gather"]
    lines.append(f"Mean absolute error over the {len(errors)} rows: **{100 * mean:.1f}%**; worst row: "
                 f"{describe(ROWS[worst][1], ROWS[worst][2])} on {ROWS[worst][0]}, {100 * errors[worst]:+.1f}%. "
                 f"Without the two all-gathers: {100 * sum(on_one_chip) / len(on_one_chip):.1f}%.")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--sensitivity", action="store_true", help="also rerun with each assumption x1.25")
    parser.add_argument("--write", action="store_true", help="write docs/validation.md")
    args = parser.parse_args()
    if args.worker:
        worker(args.worker)
        return
    start = time.time()
    base = measure()
    text = table(base)
    print(text, flush=True)
    moves = sensitivity(base) if args.sensitivity else "(not measured: run with --sensitivity)"
    if args.sensitivity:
        print("\n" + moves)
    print(f"\n(host time {time.time() - start:.0f} s)")
    if args.write:
        page = (ROOT / "bench" / "validation_page.md").read_text()
        (ROOT / "docs" / "validation.md").write_text(page.replace("{{TABLE}}", text).replace("{{SENSITIVITY}}", moves))


if __name__ == "__main__":
    main()
