#!/usr/bin/env python3
"""Runs every optimizer of torch's optim_db, each sample configuration, in its for-loop, foreach
and fused forms on "tpu" and on the CPU (tests/python/optimizer_harness.py) and writes
docs/optimizers.md: per optimizer and form native / fallback / mismatch / unsupported / error.
Usage: PYTHONPATH=torch_bridge/python:tests/python python3 scripts/optimizer_report.py [docs/optimizers.md]
"""
import collections
import pathlib
import sys
import time
import warnings



def main(out: pathlib.Path) -> None:
    warnings.filterwarnings("ignore")
    from torch.testing._internal.common_optimizers import optim_db

    import vtpu  # noqa: F401
    from optimizer_harness import IMPLS, STATUSES, run_case, worst_status

    started = time.time()
    rows, totals = [], collections.Counter()
    for info in optim_db:
        cells, problems = [], []
        for impl in IMPLS:
            counts = collections.Counter()
            first = {}
            for optim_input in info.optim_inputs_func(device="cpu"):
                status, problem = run_case(info, optim_input, impl)
                if status == "skip":
                    continue
                counts[status] += 1
                if problem:
                    first.setdefault(status, f"{impl}, {optim_input.desc}: {problem}")
            if not counts:
                cells.append("-")
                continue
            worst = worst_status(counts)
            totals[worst] += 1
            cells.append(f"{worst} ({sum(counts.values())})")
            if worst in first:
                problems.append(first[worst].replace("|", "\\|"))
        rows.append(f"| {info.optim_cls.__name__} | " + " | ".join(cells) + " | " + "; ".join(problems) + " |")
    lines = ["# Optimizer differential report", "",
             "`scripts/optimizer_report.py`: every optimizer of torch's `optim_db` "
             "(`torch.testing._internal.common_optimizers`), with each of its sample configurations, in each form "
             "it supports (`forloop`: foreach=False; `foreach`; `fused`), takes three steps of a small MLP on `tpu` "
             "(v5e, defer_and_fuse) and on the CPU under a StepLR schedule with `clip_grad_norm_` (LBFGS with its "
             "closure); parameters and optimizer state are compared with atol 1e-5, rtol 1e-4. A cell is the worst "
             "status over the configurations (their count in brackets); `native`: no CPU op at all. A mismatch "
             "names how far the chip's parameters land from the CPU's and, beside it, how far the CPU's own land "
             "when its initial parameters move by one ulp: how much the optimizer amplifies rounding. SparseAdam "
             "(sparse gradients only) is not run.", "",
             "| status | optimizer forms |", "| --- | ---: |"]
    lines += [f"| {s} | {totals.get(s, 0)} |" for s in STATUSES]
    lines += ["", f"Sweep time: {time.time() - started:.0f} s on this machine.", "",
              "| optimizer | " + " | ".join(IMPLS) + " | first problem |", "| --- |" + " --- |" * (len(IMPLS) + 1)]
    lines += rows
    out.write_text("\n".join(lines) + "\n")
    print(dict(totals), f"-> {out}")


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "docs/optimizers.md"))
