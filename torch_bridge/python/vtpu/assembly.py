"""Kernels written in vtpu assembly (docs/isa.md), run on tpu tensors: the raw end of the kernel
API. A kernel's `.arg`s are bound in order: a contiguous tpu tensor for each buffer (read and
written in place, so outputs are tensors the caller allocated) and an int for each scalar.

    add = open("examples/vector_add.s").read()
    c = torch.empty_like(a)
    vtpu.run_assembly(add, a, b, c, a.numel())   # c = a + b, on the chip

The kernel runs at once, after the device's pending work; its simulated time joins the clock,
vtpu.stats() (per_kernel under its `.name`), vtpu.trace() and torch.profiler. An error (a race
between a DMA and vector accesses, a trap, a deadlock, and in debug mode a read of VMEM the
kernel never wrote) names the kernel, the instruction and the Python line that ran it.
"""
from __future__ import annotations

import torch

from . import _C, debug_mode


def run_assembly(source: str, *args: torch.Tensor | int, defines: dict[str, int] | None = None) -> dict:
    """Assembles `source` (with `defines` set like vtpu-run's -D) and runs it on `args`. Returns
    the launch's simulated cycles and seconds and its HBM bytes read and written."""
    try:
        return _C.run_assembly(source, list(args), {k: int(v) for k, v in (defines or {}).items()})
    except (RuntimeError, ValueError, TypeError) as error:
        raise debug_mode.located(error, "a vtpu.run_assembly kernel") from None

