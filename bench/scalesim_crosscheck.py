"""Cross-checks vtpu's MXU timing against SCALE-Sim (PyPI `scalesim`, a peer systolic-array
simulator) on the same GEMMs: one 128x128 array, weight-stationary dataflow, operands already on
chip (SCALE-Sim's "Total Cycles" excludes its DRAM prefetch; bench-mxu-gemm-cycles runs vtpu's MXU
with data in VMEM). Prints both cycle counts, their ratio, and each simulator's closed form.
docs/scalesim.md explains the systematic difference.

scalesim 3.0.0 fails with numpy >= 2 (an int() of an array in its scratchpad model), so it runs
in its own virtual environment (build/scalesim-venv, made on first use: scalesim==3.0.0,
numpy<2). Usage: python3 bench/scalesim_crosscheck.py  (after scripts/build)
"""
import os
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
BUILD = pathlib.Path(os.environ.get("VTPU_BUILD_DIR", ROOT / "build"))
VENV = BUILD / "scalesim-venv"
SHAPES = [  # M (streamed rows), N (output columns), K (contraction)
    (256, 128, 128), (512, 512, 512), (1024, 1024, 1024), (4096, 128, 128), (128, 1024, 4096),
    (2048, 256, 1024), (64, 2048, 2048), (1000, 700, 300), (300, 1000, 129), (8, 4096, 4096),
]

CONFIG = """[general]
run_name = vtpu_ws

[architecture_presets]
ArrayHeight: 128
ArrayWidth: 128
IfmapSramSzkB: 65536
FilterSramSzkB: 65536
OfmapSramSzkB: 65536
IfmapOffset: 0
FilterOffset: 100000000
OfmapOffset: 200000000
Dataflow: ws
Bandwidth: 10000
ReadRequestBuffer: 32
WriteRequestBuffer: 32

[layout]
IfmapCustomLayout: False
IfmapSRAMBankBandwidth: 10
IfmapSRAMBankNum: 10
IfmapSRAMBankPort: 2
FilterCustomLayout: False
FilterSRAMBankBandwidth: 10
FilterSRAMBankNum: 10
FilterSRAMBankPort: 2

[sparsity]
SparsitySupport: false
SparseRep: ellpack_block
OptimizedMapping: false
BlockSize: 8
RandomNumberGeneratorSeed: 40

[run_presets]
InterfaceBandwidth: USER
UseRamulatorTrace: False
"""

RUNNER = """
import sys
from scalesim.scale_sim import scalesim
s = scalesim(save_disk_space=True, verbose=False, config=sys.argv[1], topology=sys.argv[2], layout=sys.argv[3],
             input_type_gemm=True)
s.run_scale(top_path=sys.argv[4])
"""


def ensure_venv() -> pathlib.Path:
    python = VENV / "bin" / "python"
    if not python.exists():
        print(f"scalesim: creating {VENV} (scalesim==3.0.0, numpy<2)", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "scalesim==3.0.0", "numpy<2"], check=True)
    return python


def scalesim_cycles(python: pathlib.Path) -> list[int]:
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        (tmp / "scale.cfg").write_text(CONFIG)
        rows = "".join(f"g{i}, {m}, {n}, {k},\n" for i, (m, n, k) in enumerate(SHAPES))
        (tmp / "gemm.csv").write_text("Layer, M, N, K,\n" + rows)
        # The layout file is required even with custom layouts off; its values are then unused.
        layout_rows = "".join(f"g{i},1,1,1,1,1,1,0,1,2,0,1,2,0,1,2,3,0,1,2,3,\n" for i in range(len(SHAPES)))
        (tmp / "layout.csv").write_text("Layer" + ",x" * 20 + ",\n" + layout_rows)
        (tmp / "run.py").write_text(RUNNER)
        subprocess.run([str(python), str(tmp / "run.py"), str(tmp / "scale.cfg"), str(tmp / "gemm.csv"),
                        str(tmp / "layout.csv"), str(tmp / "out")], check=True, cwd=tmp, stdout=subprocess.DEVNULL)
        report = (tmp / "out" / "vtpu_ws" / "COMPUTE_REPORT.csv").read_text().strip().splitlines()[1:]
        return [int(line.split(",")[2]) for line in report]  # "Total Cycles" (without DRAM prefetch)


def vtpu_cycles() -> list[int]:
    args = [str(x) for shape in SHAPES for x in shape]
    out = subprocess.run([str(BUILD / "bench" / "bench-mxu-gemm-cycles"), *args], check=True, capture_output=True,
                         text=True).stdout
    return [int(line.split()[3]) for line in out.strip().splitlines()]


def folds(m, n, k, d=128):
    return -(-n // d) * -(-k // d)


def main():
    ours = vtpu_cycles()
    theirs = scalesim_cycles(ensure_venv())
    print("| M x N x K | weight tiles | SCALE-Sim cycles | vtpu cycles | vtpu / SCALE-Sim |")
    print("|---|---:|---:|---:|---:|")
    ratios = []
    for (m, n, k), s, v in zip(SHAPES, theirs, ours):
        ratios.append(v / s)
        print(f"| {m}x{n}x{k} | {folds(m, n, k)} | {s} | {v} | {v / s:.3f} |")
    print(f"\nratio range {min(ratios):.3f} .. {max(ratios):.3f}")
    print("closed forms per 128x128 weight tile with R streamed rows (R <= 512 per pass):")
    print("  SCALE-Sim ws: weights fill (128) + R + skew out (128 + 128 - 2), tiles in sequence")
    print("  vtpu:         R (8 cycles per 8 rows); weight loads double-buffered behind the previous tile;")
    print("                + one weight load (128) at the start and one fill/drain (128) at the end")


if __name__ == "__main__":
    main()
