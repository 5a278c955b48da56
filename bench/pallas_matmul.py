"""The Pallas TPU matmul tutorial's kernel (jax docs/pallas/tpu/matmul: a bf16 blocked matmul with
an f32 VMEM accumulator, the K axis last in the grid; examples/pallas_matmul.py) timed on the
simulated v5e, beside the tutorial's published v5e times (../shared/REFERENCES.md). Prints a
markdown table: simulated and published milliseconds, the error, and the simulated time per grid
step. docs/tutorial.md (section 2) carries its output. Inputs are zeros: the simulated time does not depend on
the values, and the run is functional (about a minute of host time for 8192^3).

    python3 bench/pallas_matmul.py            # all rows
    python3 bench/pallas_matmul.py --quick    # the 4096^3 rows only
"""
import argparse
import pathlib
import sys
import time

import torch

import vtpu

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "examples"))
from pallas_matmul import blocked_matmul  # noqa: E402  (the kernel, shared with the tests)

# (size, bm, bk, bn, published ms on v5e)
PUBLISHED = [
    (4096, 512, 1024, 1024, 0.889),
    (8192, 512, 1024, 1024, 6.099),
    (4096, 128, 128, 128, 11.77),
    (8192, 128, 128, 128, 91.84),
]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="the 4096^3 rows only")
    args = parser.parse_args()
    if vtpu.chip_name() != "v5e":
        raise SystemExit(f"run on the v5e preset (VTPU_CHIP=v5e); this process simulates {vtpu.chip_name()}")
    clock_hz = 1.5e9
    print("| size | bm, bk, bn | grid steps | simulated ms | published ms (v5e) | error | simulated us per step | TFLOP/s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for size, bm, bk, bn, published in PUBLISHED:
        if args.quick and size > 4096:
            continue
        x = torch.zeros(size, size, dtype=torch.bfloat16, device="tpu")
        f = blocked_matmul(size, size, size, bm, bk, bn, chip="v5e")
        vtpu.synchronize()
        vtpu.reset_stats()
        start = time.time()
        z = f(x, x)  # noqa: F841  (kept: a result nobody reads is never computed)
        vtpu.synchronize()
        cycles = vtpu.stats()["per_kernel"]["matmul_kernel"]["cycles"]
        ms = cycles / clock_hz * 1e3
        steps = (size // bm) * (size // bn) * (size // bk)
        tflops = 2 * size**3 / (ms / 1e3) / 1e12
        print(f"| {size}^3 | {bm}, {bk}, {bn} | {steps} | {ms:.3f} | {published} | {100 * (ms / published - 1):+.1f}% | "
              f"{ms * 1e3 / steps:.3f} | {tflops:.1f} |", flush=True)
        print(f"<!-- host {time.time() - start:.0f} s -->", flush=True)


if __name__ == "__main__":
    main()
