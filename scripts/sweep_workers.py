"""Runs a sweep in worker processes that can die: a worker prints one JSON line per item from a
start index ({"begin": i, "total": n} before each item, then the item's result with "index"), and
when one dies (a crash in the bridge) its current item is recorded as a crash and a new worker
continues after it, so one bug cannot hide the rest. Shared by the OpInfo and ModuleInfo reports."""
import json
import os
import subprocess
import sys
import time


def run_restartable(script: str, worker_args: list[str], label: str) -> tuple[dict, float]:
    """{index: result} of the items `script --worker *worker_args START` reports, and the seconds it took."""
    start_time = time.time()
    results, index, total = {}, 0, None
    while total is None or index < total:
        proc = subprocess.Popen([sys.executable, script, "--worker", *worker_args, str(index)], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True, env=os.environ)
        current = index
        for line in proc.stdout:
            try:
                msg = json.loads(line)
            except json.JSONDecodeError:  # a library's own print (MKL's "Parameter 3 was incorrect ...")
                continue
            if "begin" in msg:
                current, total = msg["begin"], msg["total"]
                if current % 100 == 0:
                    print(f"{label}: {current}/{total}, {time.time() - start_time:.0f} s", flush=True)
            else:
                results[msg["index"]] = msg
        code = proc.wait()
        if code != 0 and current not in results:
            results[current] = {"index": current, "name": None, "status": "crash", "counts": {},
                                "problem": f"worker died with exit code {code}"}
        index = max(results) + 1 if results else index + 1
    return results, time.time() - start_time


def item_rows(results: dict) -> list[str]:
    """One table row per swept item, by name: | name | status | counts by status | first problem |."""
    rows = []
    for r in sorted(results.values(), key=lambda r: r["name"]):
        counts = ", ".join(f"{k} {v}" for k, v in sorted(r["counts"].items()))
        problem = r["problem"].replace("|", "\\|").replace("\n", " ")
        rows.append(f"| {r['name']} | {r['status']} | {counts} | {problem} |")
    return rows
