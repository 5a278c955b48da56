#!/usr/bin/env python3
"""Runs torch's ModuleInfo database (module_db) on "tpu" and on the CPU, forward and backward, in
training and eval mode (tests/python/moduleinfo_harness.py), and writes docs/moduleinfo.md: per
module native / fallback / mismatch / unsupported / error / crash, with totals.
Usage: PYTHONPATH=torch_bridge/python:tests/python python3 scripts/moduleinfo_report.py [docs/moduleinfo.md]
"""
import collections
import json
import pathlib
import sys

from sweep_workers import item_rows, run_restartable

STATUSES = ("native", "fallback", "mismatch", "unsupported", "error", "crash", "skipped")


def worker(start: int) -> None:
    import warnings

    warnings.filterwarnings("ignore")
    from torch.testing._internal.common_modules import module_db

    import vtpu  # noqa: F401
    from moduleinfo_harness import run_module

    for i in range(start, len(module_db)):
        print(json.dumps({"begin": i, "total": len(module_db)}), flush=True)
        r = run_module(module_db[i])
        print(json.dumps({"index": i, "name": r.name, "status": r.status, "counts": r.counts,
                          "problem": r.first_problem}), flush=True)


def main(out: pathlib.Path) -> None:
    from torch.testing._internal.common_modules import module_db

    results, seconds = run_restartable(__file__, [], "module_db")
    for i, r in results.items():
        if r["name"] is None:
            r["name"] = module_db[i].name
    totals = collections.Counter(r["status"] for r in results.values())
    counted = sum(totals.values()) - totals.get("skipped", 0)
    lines = ["# ModuleInfo differential report", "",
             f"`scripts/moduleinfo_report.py`: each of the {len(module_db)} modules of torch's ModuleInfo database "
             "(`torch.testing._internal.common_modules.module_db`) is built from its first 2 samples' constructor "
             "arguments, in training and in eval mode, copied to `tpu` (v5e, defer_and_fuse) and run forward and "
             "backward there and on the CPU: outputs, the gradients of a fixed weighted sum of the outputs with "
             "respect to the inputs and every parameter, and the buffers (running statistics) are compared with "
             "atol = rtol = 1e-4, NaN equal only to NaN; random modules (dropout, fractional max pooling, RReLU) "
             "compare shapes and dtypes. A module's status is its worst sample's (statuses as in "
             "[opinfo.md](opinfo.md)); `fallback` names the aten ops that ran on the CPU.", "",
             "| status | modules |", "| --- | ---: |"]
    for status in STATUSES:
        lines.append(f"| {status} | {totals.get(status, 0)} |")
    lines += [f"| **native share** (of modules not skipped) | **{100 * totals.get('native', 0) / max(counted, 1):.1f}%** |",
              "", f"Sweep time: {seconds:.0f} s on this machine.", "",
              "| module | status | samples | first problem |", "| --- | --- | --- | --- |"]
    lines += item_rows(results)
    out.write_text("\n".join(lines) + "\n")
    print(dict(totals), f"-> {out}")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--worker":
        worker(int(sys.argv[2]))
    else:
        main(pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "docs/moduleinfo.md"))
