"""What-if sweeps: one model's prefill and decode step timed (vtpu.timing_only) across the chip
presets, across edited parameters of one preset, and across fusion strategies and modes, one
table each. Each row runs in its own process (bench/full_size_models.py's worker: the model on
the meta device, moved with to_empty, no host memory for weights), two at a time.

The model is Llama-2-7B (multi-head attention, 128-wide heads, 13.5 GB of bf16 weights): it fits
every preset's HBM, v5e's 16 GiB included, and its heads fit every generation's MXU, so each
row runs the same kernels and differs only by the chip or the strategy.

An edited preset is v6e's JSON with the named fields scaled, written to a temporary file and
passed as VTPU_CHIP; its source strings say what was edited. A what-if changes the model, not a
claim about any real chip.

    python3 bench/what_if.py [--write]     (about 10 minutes on this machine)
      --write: write docs/what_if.md
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import pathlib
import tempfile

from chip_processes import preset
from full_size_models import flops_per_token, run_row

ROOT = pathlib.Path(__file__).resolve().parents[1]
MODEL = "Llama-2-7B"
WORKLOADS = [("prefill", 4096), ("decode", (8, 2048))]
PRESETS = ["v4", "v5e", "v5p", "v6e", "v7"]
BASE = "v6e"
# (what, {preset field: factor}). v6e's MXU count is the preset's own open question (2 or 4 per
# core; the preset takes 4); a preset must reproduce its peak from its MXUs and clock, so halving
# the MXUs halves the peak. VMEM edits scale the held share with it (a quarter, as the preset).
EDITS = [
    ("HBM bandwidth x0.5", {"hbm_bandwidth_bytes_per_s": 0.5}),
    ("HBM bandwidth x2", {"hbm_bandwidth_bytes_per_s": 2}),
    ("2 MXUs per core (of 4)", {"mxu_per_core": 0.5, "peak_bf16_flops": 0.5}),
    ("VMEM x0.5 (64 MiB)", {"vmem_bytes": 0.5, "vmem_held_bytes": 0.5}),
    ("VMEM x2 (256 MiB)", {"vmem_bytes": 2, "vmem_held_bytes": 2}),
]
# (what, mode, VTPU_FUSION or None), on the base preset.
STRATEGIES = [
    ("strict_eager (one kernel per op)", "strict_eager", None),
    ("defer_and_fuse, fusion none", "defer_and_fuse", "none"),
    ("defer_and_fuse, greedy fusion (default)", "defer_and_fuse", None),
    ("compiled (torch.compile, backend tpu)", "compiled", None),
]


def edited_preset(directory: pathlib.Path, index: int, what: str, scales: dict) -> str:
    """v6e's preset with `scales` applied, as a file VTPU_CHIP can name."""
    config = preset(BASE)
    for field, factor in scales.items():
        value = config[field]["value"]
        config[field] = {"value": type(value)(value * factor), "source": f"what-if: {what} ({BASE}'s {value} x {factor})"}
    path = directory / f"{BASE}-what-if-{index}.json"
    path.write_text(json.dumps(config, indent=2))
    return str(path)


def cells(r: dict, base: dict | None, workload: str, chip: str | None) -> str:
    """One workload's cells: simulated ms, tokens/s (with MFU when `chip` names a preset), vs the base row."""
    if "error" in r:
        if "OutOfMemoryError" in r["error"]:
            return f"out of HBM ({preset(chip)['hbm_bytes']['value'] / 2**30:.0f} GiB) | - | -" if chip else "out of HBM | - | -"
        return f"fails: {r['error'].replace('|', '/')[:80]} | - | -"
    ms = r["seconds"] * 1e3
    rate = r["timed_tokens"] / r["seconds"]
    peak = preset(chip)["peak_bf16_flops"]["value"] if chip else 0
    mfu = f" ({100 * flops_per_token(workload) * r['parameters'] * rate / peak:.0f}% MFU)" if chip else ""
    ratio = f"{r['seconds'] / base['seconds']:.2f}x" if base and "error" not in base else "-"
    return f"{ms:,.1f} | {rate:,.0f}{mfu} | {ratio}"


def sweep(title: str, variants: list, base_label: str, columns: str, run, presets: bool = False) -> list[str]:
    """Runs `run(variant, workload)` for every workload of every variant, two processes at a time,
    and returns the table: one row per variant (its label first), each workload's cells with its
    ratio to the base variant's. `presets`: each variant's second field names a preset (MFU shown)."""
    jobs = [(v, w) for v in variants for w in WORKLOADS]
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        results = dict(zip(jobs, pool.map(lambda job: run(*job), jobs)))
    base = next(v for v in variants if v[0] == base_label)
    lines = [f"### {title}", "",
             f"| {columns} | prefill 4,096: simulated ms | tokens/s | vs base | decode 8 x 1 (context 2,048): "
             "simulated ms | tokens/s | vs base | kernels (prefill) | HBM GB moved (prefill) |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for v in variants:
        row = [cells(results[(v, w)], results[(base, w)], w[0], v[1] if presets else None) for w in WORKLOADS]
        prefill = results[(v, WORKLOADS[0])]
        extra = f"{prefill['kernels']} | {prefill['hbm_bytes'] / 1e9:.1f}" if "error" not in prefill else "- | -"
        lines.append(f"| {v[0]} | {row[0]} | {row[1]} | {extra} |")
    print("\n".join(lines), flush=True)
    return lines + [""]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--write", action="store_true", help="write docs/what_if.md")
    args = parser.parse_args()
    page = []
    page += sweep(f"Presets (base: {BASE})", [(chip, chip) for chip in PRESETS], BASE, "chip",
                  lambda v, w: run_row(MODEL, v[1], *w), presets=True)
    with tempfile.TemporaryDirectory() as directory:
        edits = [(f"{BASE} as published", BASE)] + [
            (what, edited_preset(pathlib.Path(directory), i, what, scales)) for i, (what, scales) in enumerate(EDITS)]
        page += sweep(f"Chip parameters ({BASE} edited; base: {BASE} as published)", edits, f"{BASE} as published", "chip",
                      lambda v, w: run_row(MODEL, v[1], *w))
    page += sweep(f"Fusion strategies and modes ({BASE}; base: greedy fusion)", STRATEGIES, STRATEGIES[2][0], "strategy",
                  lambda v, w: run_row(MODEL, BASE, *w, mode=v[1], env={"VTPU_FUSION": v[2]} if v[2] else None))
    if args.write:
        template = (ROOT / "bench" / "what_if_page.md").read_text()
        (ROOT / "docs" / "what_if.md").write_text(template.replace("{{TABLES}}", "\n".join(page)))


if __name__ == "__main__":
    main()
