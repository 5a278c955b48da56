#!/usr/bin/env python3
"""Runs every OpInfo op's error inputs (inputs torch's tests expect the op to reject, with the
exception type and message) on "tpu" with the CPU fallback off and writes docs/error_inputs.md:
per op how many are rejected as on the CPU, rejected differently, declined as unsupported, or
accepted silently, with totals. Workers restart after a crash (sweep_workers.py).
Usage: PYTHONPATH=torch_bridge/python:tests/python python3 scripts/error_inputs_report.py [docs/error_inputs.md]
"""
import collections
import json
import pathlib
import sys

from sweep_workers import item_rows, run_restartable


def worker(start: int) -> None:
    """Prints one JSON line per op from index `start` on ("begin" first, so a crash is attributable)."""
    import warnings

    warnings.filterwarnings("ignore")
    import vtpu  # noqa: F401
    from error_inputs_harness import ops_with_error_inputs, run_error_inputs

    ops = ops_with_error_inputs()
    for i in range(start, len(ops)):
        print(json.dumps({"begin": i, "total": len(ops)}), flush=True)
        r = run_error_inputs(ops[i])
        print(json.dumps({"index": i, "name": r.name, "status": r.status, "counts": r.counts,
                          "problem": r.first_problem}), flush=True)


def main(out: pathlib.Path) -> None:
    from error_inputs_harness import op_name, ops_with_error_inputs

    results, seconds = run_restartable(__file__, [], "error inputs")
    ops = ops_with_error_inputs()
    for i, r in results.items():
        if r["name"] is None:  # crashed: named here
            r["name"] = op_name(ops[i])
    inputs = collections.Counter()
    for r in results.values():
        inputs.update(r["counts"])
        if r["status"] == "crash":
            inputs["crash"] += 1
    ops_by_status = collections.Counter(r["status"] for r in results.values())
    statuses = ("match", "other error", "unsupported", "silent", "crash", "skipped")
    lines = ["# Bad input: OpInfo's error inputs on the chip", "",
             "`scripts/error_inputs_report.py`: every OpInfo entry with `error_inputs` (inputs torch's own tests "
             "expect the op to reject, with an exception type and a message pattern) runs them on `tpu` (v5e, "
             "defer_and_fuse, CPU fallback off), reading every result back so deferred kernels run too. "
             "`match`: the expected exception type and message, as on the CPU, or exactly what torch's meta kernel "
             "raises for the same call (vtpu asks it before declining an op; some meta kernels word a check "
             "differently from the CPU's). `other error`: rejected, but with "
             "another type or message. `unsupported`: vtpu declined the op (NotImplementedError) before torch's "
             "checks said why the input is bad. `silent`: a result where the CPU raises. `crash`: the process died. "
             "`skipped`: the CPU itself does not raise as expected (inputs written for another device). An op's "
             "status is its worst input's. Tensors keep their storage sharing and strides on `tpu` (several "
             "inputs are out= tensors that overlap an input or themselves).", "",
             "| status | error inputs | ops |", "| --- | ---: | ---: |"]
    for s in statuses:
        lines.append(f"| {s} | {inputs.get(s, 0)} | {ops_by_status.get(s, 0)} |")
    counted = sum(v for k, v in inputs.items() if k != "skipped")
    lines += [f"| **match share** (of inputs not skipped) | **{100 * inputs.get('match', 0) / max(counted, 1):.1f}%** | |",
              "", f"Sweep time on this machine: {seconds:.0f} s.", "",
              "| op | status | inputs by status | first problem |", "| --- | --- | --- | --- |"]
    lines += item_rows(results)
    out.write_text("\n".join(lines) + "\n")
    print(dict(inputs), f"-> {out}")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--worker":
        worker(int(sys.argv[2]))
    else:
        main(pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "docs/error_inputs.md"))
