#!/usr/bin/env python3
"""The full model-zoo sweep: every Hugging Face architecture with a base model class, built from a
shrunk config (tests/zoo/harness.py), run on CPU and on device "tpu" in each mode. Writes
docs/zoo.md (the report) and docs/zoo.json (every result).

    scripts/zoo_sweep.py                  # all architectures, 2 worker processes (~1 hour here)
    scripts/zoo_sweep.py --only gpt2 bert # a few
    scripts/zoo_sweep.py --training-only  # the training column alone, merged into docs/zoo.json
    scripts/zoo_sweep.py --merge --only mixtral olmoe  # rerun a few, merged into docs/zoo.json

Architectures run in batches inside worker processes; one that crashes its process or runs past
--timeout is recorded as such and the batch goes on in a new process.
"""
from __future__ import annotations

import argparse
import collections
import json
import pathlib
import queue
import re
import subprocess
import sys
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
HARNESS = ROOT / "tests" / "zoo" / "harness.py"
sys.path.insert(0, str(HARNESS.parent))
import harness  # noqa: E402  (its modes and tolerance, for the report)


def all_model_types() -> list[str]:
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    return sorted(MODEL_MAPPING_NAMES)


def run_batch(batch: list[str], timeout: float, results: dict, retry: queue.Queue, training_only: bool) -> None:
    """Runs a batch in one worker; whatever it did not finish goes back on the queue."""
    flags = ["--training-only"] if training_only else []
    proc = subprocess.Popen([sys.executable, str(HARNESS), *flags, *batch], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, cwd=ROOT)
    current = {"type": None, "timed_out": False}
    timer = None

    def kill():
        current["timed_out"] = True
        proc.kill()

    for line in proc.stdout:
        if line.startswith("START "):
            current["type"] = line.split()[1]
            if timer:
                timer.cancel()
            timer = threading.Timer(timeout, kill)
            timer.start()
        elif line.startswith("RESULT "):
            result = json.loads(line[len("RESULT "):])
            results[result["model_type"]] = result
            current["type"] = None
            print(f"  {result['model_type']}: {summary_word(result)}", flush=True)
    if timer:
        timer.cancel()
    proc.wait()
    if current["type"] is not None:
        status = "timeout" if current["timed_out"] else "crash"
        why = f"over {timeout:.0f} s" if current["timed_out"] else f"the process died (exit {proc.returncode})"
        results[current["type"]] = {"model_type": current["type"], "status": status, "reason": why}
        print(f"  {current['type']}: {status}", flush=True)
    rest = [t for t in batch if t not in results]
    if rest:
        retry.put(rest)


def summary_word(result: dict) -> str:
    if result["status"] != "ran":
        return result["status"]
    words = [f"{m}={r['status']}" for m, r in result["modes"].items()]
    if "training" in result:
        words.append(f"training={result['training']['status']}")
    return " ".join(words)


def sweep(model_types: list[str], jobs: int, batch_size: int, timeout: float, training_only: bool = False) -> dict:
    work: queue.Queue = queue.Queue()
    for i in range(0, len(model_types), batch_size):
        work.put(model_types[i:i + batch_size])
    results: dict = {}

    def worker():
        while True:
            try:
                batch = work.get(timeout=1)
            except queue.Empty:
                if all(t in results for t in model_types):
                    return
                continue
            run_batch(batch, timeout, results, work, training_only)

    threads = [threading.Thread(target=worker) for _ in range(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def training_totals(ran: list, pct) -> list[str]:
    """The training column's totals and what stops it (tests/zoo/training_step.py), when measured."""
    trained = [r for r in ran if "training" in r and r["training"]["status"] != "cpu_error"]
    if not trained:
        return []
    c = collections.Counter(r["training"]["status"] for r in trained)
    commit = next((r["training"]["commit"] for r in trained if "commit" in r["training"]), "")
    stops = collections.Counter(r["training"].get("failing_op") or r["training"].get("error", "")[:100]
                                for r in trained if r["training"]["status"] == "error")
    out = [f"- training (one step natively: forward, MSE loss against random targets, backward, AdamW; "
           f"tests/zoo/training_step.py{', commit ' + commit if commit else ''}): pass {pct(c['pass'], len(trained))} "
           f"of the {len(trained)} that train on the CPU, mismatch {c['mismatch']}, error {c['error']}", "",
           "What stops the training step on the chip:", "", "| first missing op or error | architectures |", "|---|---|"]
    out += [f"| `{op}` | {n} |" for op, n in stops.most_common(25)]
    return out


def existing_sweep(md: pathlib.Path) -> tuple[dict, str, float]:
    """The report's rows by model type, and the commit and minutes of the sweep that made it (for
    runs merged into it)."""
    rows = {r["model_type"]: r for r in json.loads(md.with_suffix(".json").read_text())}
    text = md.read_text()
    return rows, re.search(r"commit (\w+)\)", text).group(1), float(re.search(r"(\d+) min on this machine", text).group(1))


def _rerun_note(rows: list, commit: str) -> str:
    """The architectures `--merge` reran after the sweep, by commit (each such row records its own)."""
    by_commit = collections.defaultdict(list)
    for r in rows:
        if r.get("commit") and r["commit"] != commit:
            by_commit[r["commit"]].append(r["model_type"])
    return "".join(f" Rerun at commit {c} (`--merge`) and merged: {len(types)} architectures ({', '.join(types)})."
                   for c, types in sorted(by_commit.items()))


def write_report(results: dict, seconds: float, md_path: pathlib.Path, json_path: pathlib.Path,
                 commit: str = "") -> None:
    import torch
    import transformers

    rows = [results[k] for k in sorted(results)]
    ran = [r for r in rows if r["status"] == "ran"]
    by_status = collections.Counter(r["status"] for r in rows)
    modes = harness.MODES
    mode_counts = {m: collections.Counter(r["modes"][m]["status"] for r in ran) for m in modes}
    # native passes only on a match: every op on the chip (fallback off) and defer_and_fuse's output
    # (the same ops, as no fallback op ran there either) within the tolerance
    native_ran = [r for r in ran if r["native"]["status"] == "pass"]
    native_pass = sum(r["modes"]["defer_and_fuse"]["status"] == "pass" for r in native_ran)
    native_mismatch = sorted(r["model_type"] for r in native_ran if r["modes"]["defer_and_fuse"]["status"] != "pass")
    blockers = collections.Counter(r["native"].get("failing_op") or "(no aten op named)" for r in ran
                                   if r["native"]["status"] != "pass")
    fallbacks = collections.Counter(op for r in ran if r["modes"]["defer_and_fuse"]["status"] == "pass"
                                    for op in r["modes"]["defer_and_fuse"]["fallback_ops"])

    def pct(n, d):
        return f"{n}/{d} ({100 * n / d:.0f}%)" if d else "0/0"

    out = ["# Model zoo: Hugging Face architectures on device \"tpu\"", "",
           f"Generated by `scripts/zoo_sweep.py` (transformers {transformers.__version__}, torch {torch.__version__}, "
           f"{seconds / 60:.0f} min on this machine{', commit ' + commit if commit else ''}). Each architecture with a base model class (`AutoModel`) is "
           "built from its default config shrunk to 2 layers, width 64 (tests/zoo/harness.py; when that model fails on "
           "the CPU, a gentler shrink keeping the widths is tried), with random weights, "
           "and run forward on one small input on the CPU and on `tpu` in each mode, with the CPU fallback on. "
           f"A mode passes when every floating-point output is within {harness.TOLERANCE:g} of the CPU's, relative to the output's "
           "largest magnitude. `native` repeats defer_and_fuse with the fallback off: it passes only when every op "
           "ran on the chip, and otherwise names the first aten op that has no lowering." + _rerun_note(rows, commit), "",
           "## Totals", "",
           f"- Architectures tried: {len(rows)}",
           f"- Not buildable by the harness (no small config or no inputs it knows how to make): {by_status['not_buildable']}",
           f"- Build but fail on the CPU itself (excluded from the rates below): {by_status['cpu_error']}",
           f"- Crashed or timed out in the harness: {by_status['crash'] + by_status['timeout'] + by_status['harness_error']}",
           f"- **Run on the CPU: {len(ran)}**", ""]
    for m in modes:
        c = mode_counts[m]
        out.append(f"- {m}: pass {pct(c['pass'], len(ran))}, mismatch {c['mismatch']}, error {c['error']}")
    out += [f"- native (no CPU fallback, defer_and_fuse, matching the CPU): pass {pct(native_pass, len(ran))}; "
            f"{len(native_ran)} run entirely on the chip, of which {len(native_mismatch)} do not match "
            f"({', '.join(native_mismatch) or 'none'}: see below)"]
    out += training_totals(ran, pct)
    out += ["",
            "## What keeps models off the chip", "",
            "First aten op without a lowering, over the architectures that do not run natively:", "",
            "| aten op | architectures |", "|---|---|"]
    out += [f"| `{op}` | {n} |" for op, n in blockers.most_common(25)]
    out += ["", "Ops that ran through the CPU fallback in passing defer_and_fuse runs:", "",
            "| aten op | architectures |", "|---|---|"]
    out += [f"| `{op}` | {n} |" for op, n in fallbacks.most_common(25)]
    causes = collections.Counter()
    for r in ran:
        for m in modes:
            mr = r["modes"][m]
            if mr["status"] == "error":
                causes[(m, mr.get("failing_op") or mr["error"][:110])] += 1
            elif mr["status"] == "mismatch":
                causes[(m, f"mismatch (relative error above {harness.TOLERANCE:g})")] += 1
    out += ["", "## Why runs fail on tpu", "", ("Every failing (architecture, mode), grouped by cause. Mismatches in every mode come from models that "
             "draw random numbers inside forward (vit_mae's random masking uses torch.rand, vits's duration "
             "predictor torch.randn_like): on tpu those numbers come from the chip's Philox generator, not the "
             "CPU's, so the outputs differ by design, as OpInfo's random ops do (docs/opinfo.md)."), "",
            "| mode | cause | architectures |", "|---|---|---|"]
    out += [f"| {m} | {cause.replace('|', '/')} | {n} |" for (m, cause), n in sorted(causes.items(), key=lambda x: -x[1])]
    out += ["", "## Per architecture", "",
            "| model type | strict_eager | defer_and_fuse | compiled | native: first missing op | training | note |",
            "|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["status"] != "ran":
            out.append(f"| {r['model_type']} | — | — | — | — | — | {r['status']}: {r.get('reason', '')[:120]} |")
            continue
        cells = []
        notes = []
        for m in modes:
            mr = r["modes"][m]
            cells.append(mr["status"])
            if mr["status"] == "error":
                notes.append(f"{m}: {mr.get('failing_op') or mr['error'][:100]}")
            elif mr["status"] == "mismatch":
                notes.append(f"{m}: relative error {mr['relative_error']:.1e}")
        native = "all on chip" if r["native"]["status"] == "pass" else f"`{r['native'].get('failing_op')}`"
        training = r.get("training", {})
        trained = training.get("status", "—")
        if trained == "error":
            trained = f"`{training.get('failing_op')}`" if training.get("failing_op") else "error"
        out.append(f"| {r['model_type']} | {' | '.join(cells)} | {native} | {trained} | {'; '.join(notes).replace('|', '/')} |")
    md_path.write_text("\n".join(out) + "\n")
    json_path.write_text(json.dumps(rows, indent=1) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="*", help="model types to run (default: all)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--batch", type=int, default=12, help="architectures per worker process")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per architecture")
    parser.add_argument("--out", default=str(ROOT / "docs" / "zoo.md"))
    parser.add_argument("--report-from", help="re-render the report from a zoo.json instead of running")
    parser.add_argument("--minutes", type=float, default=0, help="with --report-from: the sweep's duration")
    parser.add_argument("--commit", help="the commit the results were measured at (default: HEAD)")
    parser.add_argument("--merge", action="store_true",
                        help="with --only: rerun those architectures in full and merge their rows into the existing zoo.json")
    parser.add_argument("--training-only", action="store_true",
                        help="run the training step alone and merge it into the existing zoo.json")
    args = parser.parse_args()
    commit = args.commit or subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                           cwd=ROOT).stdout.strip()
    md = pathlib.Path(args.out)
    if args.report_from:
        rows = json.loads(pathlib.Path(args.report_from).read_text())
        write_report({r["model_type"]: r for r in rows}, args.minutes * 60, md, md.with_suffix(".json"), commit)
        return 0
    if args.training_only:  # the forward results stay as measured; each gains its training result
        rows, forward_commit, minutes = existing_sweep(md)
        ran = [t for t in (args.only or sorted(rows)) if rows.get(t, {}).get("status") == "ran"]
        print(f"zoo: training {len(ran)} architectures, {args.jobs} workers", flush=True)
        started = time.time()
        for t, r in sweep(ran, args.jobs, args.batch, args.timeout, training_only=True).items():
            rows[t]["training"] = r.get("training") or {"status": "error", "error": f"{r['status']}: {r.get('reason', '')}"}
            rows[t]["training"]["commit"] = commit
        write_report(rows, minutes * 60, md, md.with_suffix(".json"), forward_commit)
        print(f"zoo: training merged into {md} in {(time.time() - started) / 60:.1f} min")
        return 0
    if args.merge:  # the sweep's other rows stay as measured; each rerun row records its commit
        if not args.only:
            parser.error("--merge reruns the architectures --only names")
        rows, sweep_commit, minutes = existing_sweep(md)
        print(f"zoo: rerunning {len(args.only)} architectures, {args.jobs} workers", flush=True)
        started = time.time()
        for t, r in sweep(args.only, args.jobs, args.batch, args.timeout).items():
            rows[t] = {**r, "commit": commit}
        write_report(rows, minutes * 60, md, md.with_suffix(".json"), sweep_commit)
        print(f"zoo: {len(args.only)} rows merged into {md} in {(time.time() - started) / 60:.1f} min")
        return 0
    model_types = args.only or all_model_types()
    print(f"zoo: {len(model_types)} architectures, {args.jobs} workers", flush=True)
    started = time.time()
    results = sweep(model_types, args.jobs, args.batch, args.timeout)
    write_report(results, time.time() - started, md, md.with_suffix(".json"), commit)
    print(f"zoo: wrote {md} and {md.with_suffix('.json')} in {(time.time() - started) / 60:.1f} min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
