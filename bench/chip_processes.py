"""What the Python benches that compare chip presets share: VTPU_CHIP is read once per process, so
each preset's workload runs in a process of its own (the bench's own file with --worker), which
prints one JSON object per line; and the presets' numbers are read from sim/presets, never copied.
"""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def preset(chip: str) -> dict:
    """The preset JSON of `chip` (sim/presets/<chip>.json): each field {"value", "source"}."""
    return json.loads((ROOT / "sim" / "presets" / f"{chip}.json").read_text())


def run_worker(script: str, vtpu_chip: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """`script --worker args...` in a new process whose VTPU_CHIP is `vtpu_chip` (a preset's name
    or a preset file), with `env`'s variables added (VTPU_MODE, VTPU_FUSION); the caller checks its
    return code."""
    return subprocess.run([sys.executable, script, "--worker", *args], env=dict(os.environ, VTPU_CHIP=vtpu_chip, **(env or {})),
                          capture_output=True, text=True)


def json_lines(out: subprocess.CompletedProcess) -> list:
    """The JSON objects a worker printed, one per line, in order; raises with its stderr if it failed."""
    if out.returncode != 0:
        raise SystemExit(f"worker failed:\n{out.stderr[-3000:]}")
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith(("{", "["))]
