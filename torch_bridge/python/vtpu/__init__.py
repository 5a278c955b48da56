"""vtpu: a simulated TPU behind PyTorch device "tpu".

    import vtpu, torch
    x = torch.randn(4, 4, device="tpu")
    print((x @ x).relu())          # runs on the simulated chip
    print(vtpu.stats())            # simulated cycles, HBM bytes, kernels, fusion, fallbacks

Modes: vtpu.set_mode("defer_and_fuse" | "strict_eager" | "debug") (or VTPU_MODE; VTPU_LAUNCH_BLOCKING=1 is debug). Chips: VTPU_CHIP=v5e|v6e|...,
VTPU_CHIPS=N. CPU fallback for ops not lowered yet: VTPU_CPU_FALLBACK=1. Timing without values
(full-size models): `with vtpu.timing_only():` or VTPU_TIMING_ONLY=1.
"""
from __future__ import annotations

import atexit
import contextlib
import importlib.machinery
import importlib.util
import os
import pathlib
import sys

import torch

__all__ = ["set_mode", "get_mode", "set_fusion", "get_fusion", "set_cpu_fallback", "stats", "reset_stats", "trace", "merge_traces",
           "synchronize", "chip_name", "run_assembly", "timing_only", "set_timing_only", "is_timing_only", "progress", "report",
           "max_memory"]


def _find_extension() -> pathlib.Path:
    """The built vtpu._C: next to this file when installed, else in the Meson build directory."""
    here = pathlib.Path(__file__).resolve().parent
    candidates = [here]
    if os.environ.get("VTPU_BUILD_DIR"):
        candidates.append(pathlib.Path(os.environ["VTPU_BUILD_DIR"]) / "torch_bridge")
    candidates.append(here.parents[2] / "build" / "torch_bridge")
    for folder in candidates:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = folder / f"_C{suffix}"
            if path.exists():
                return path
    raise ImportError("vtpu: the extension vtpu._C is not built; run scripts/build (looked in "
                      + ", ".join(str(c) for c in candidates) + ")")


def _load_extension():
    if "vtpu._C" in sys.modules:
        return sys.modules["vtpu._C"]
    path = _find_extension()
    spec = importlib.util.spec_from_file_location("vtpu._C", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["vtpu._C"] = module
    spec.loader.exec_module(module)
    return module


_C = _load_extension()
__version__ = _C.build_info()["version"]  # meson.build's project version: the one version string
# The simulated chips are configured from VTPU_* now, so a bad value is a ValueError at import that
# names the variable, not an error inside a device guard, where C++ could only abort.
_C.device_count()

from . import compiled as _compiled  # noqa: E402  (needs _C)
from . import device_module as _device_module  # noqa: E402  (needs _C)

if torch._C._get_privateuse1_backend_name() != "tpu":
    torch.utils.rename_privateuse1_backend("tpu")
    torch._register_device_module("tpu", _device_module)
    torch.utils.generate_methods_for_privateuse1_backend(for_tensor=True, for_module=True, for_packed_sequence=True,
                                                          for_storage=True)

from . import special_functions as _special_functions  # noqa: E402,F401  (before decompositions: it serves these)
from . import incomplete_gamma as _incomplete_gamma  # noqa: E402,F401
from . import bessel_functions as _bessel_functions  # noqa: E402,F401
from . import airy_function as _airy_function  # noqa: E402,F401
from . import orthogonal_polynomials as _orthogonal_polynomials  # noqa: E402,F401
from . import linalg_triangular as _linalg_triangular  # noqa: E402,F401
from . import linalg_lu as _linalg_lu  # noqa: E402,F401
from . import linalg_qr as _linalg_qr  # noqa: E402,F401
from . import linalg_svd as _linalg_svd  # noqa: E402,F401
from . import linalg_eigh as _linalg_eigh  # noqa: E402,F401
from . import matrix_exp as _matrix_exp  # noqa: E402,F401
from . import linalg_pseudoinverse as _linalg_pseudoinverse  # noqa: E402,F401
from . import linalg_lstsq as _linalg_lstsq  # noqa: E402,F401
from . import scans as _scans  # noqa: E402,F401  (cummax, cummin, logcumsumexp)
from . import triangle_indices as _triangle_indices  # noqa: E402,F401  (before decompositions: it serves these)
from . import float_bits as _float_bits  # noqa: E402,F401  (nextafter, frexp; before decompositions too)
from . import unique as _unique  # noqa: E402,F401
from . import fft as _fft  # noqa: E402,F401  (_fft_c2c, _fft_r2c, _fft_c2r as DFT matmuls)
from . import histogram as _histogram  # noqa: E402,F401  (histogram as the CPU bins it)
from . import upsample_linear as _upsample_linear  # noqa: E402,F401
from . import upsample_antialias as _upsample_antialias  # noqa: E402,F401
from . import ctc_loss as _ctc_loss  # noqa: E402,F401
from . import fractional_max_pool as _fractional_max_pool  # noqa: E402,F401
from . import mode as _mode  # noqa: E402,F401
from . import segment_reduce as _segment_reduce  # noqa: E402,F401
from . import grouped_mm_meta as _grouped_mm_meta  # noqa: E402,F401  (torch.compile of f32 mixture-of-experts layers)
from . import grid_sample as _grid_sample  # noqa: E402,F401
from . import decompositions as _decompositions  # noqa: E402  (after the extension's lowerings registered)
from . import module_conversion as _module_conversion  # noqa: E402,F401
from . import transformer_fast_path as _transformer_fast_path  # noqa: E402,F401
from . import flex_attention as _flex_attention  # noqa: E402,F401  (admits tpu inputs)
from . import grouped_query_attention as _grouped_query_attention  # noqa: E402,F401
from . import embedding_bag as _embedding_bag  # noqa: E402,F401
from . import convolution_3d as _convolution_3d  # noqa: E402,F401
from . import pooling_3d as _pooling_3d  # noqa: E402,F401
from . import replication_pad as _replication_pad  # noqa: E402,F401
from . import margin_losses as _margin_losses  # noqa: E402,F401
from . import pdist as _pdist  # noqa: E402,F401
from . import bincount as _bincount  # noqa: E402,F401
from . import repeat_interleave as _repeat_interleave  # noqa: E402,F401
from . import assertions as _assertions  # noqa: E402,F401
from . import autograd_decompositions as _autograd_decompositions  # noqa: E402,F401
from . import amp as _amp  # noqa: E402,F401
from . import distributed  # noqa: E402
from . import debug_mode as _debug_mode  # noqa: E402
from .assembly import run_assembly  # noqa: E402
from .trace_merge import merge_traces  # noqa: E402
from .progress import progress  # noqa: E402


def __getattr__(name: str):
    # vtpu.report (a callable module) is imported on first use, not here: `python -m vtpu.report`
    # must find it unimported (runpy warns otherwise), and matplotlib loads only when reporting.
    if name == "report":
        import importlib

        return importlib.import_module(".report", __name__)
    raise AttributeError(f"module 'vtpu' has no attribute {name!r}")

distributed.register()  # torch.distributed backend "tpu_dist"
if _C.get_mode() == "debug":  # VTPU_MODE=debug or VTPU_LAUNCH_BLOCKING=1
    _debug_mode.enable()


# Printing formats a tensor with tensor ops (isfinite, masked_select, ...). Like XLA tensors, tpu
# tensors are copied to the host first: printing is a sync point and runs no kernels.
_tensor_str_on_device = torch._tensor_str._tensor_str


def _tensor_str_on_host(self, indent):
    if self.device.type == "tpu":
        self = self.to("cpu")
    return _tensor_str_on_device(self, indent)


torch._tensor_str._tensor_str = _tensor_str_on_host


def set_mode(mode: str) -> None:
    """'strict_eager' runs every op at once; 'defer_and_fuse' records ops and runs them fused at
    sync points; 'debug' runs every op at once and checks it (vtpu/debug_mode.py)."""
    _C.set_mode(mode)
    if mode == "debug":
        _debug_mode.enable()
    else:
        _debug_mode.disable()


def get_mode() -> str:
    return _C.get_mode()


def set_fusion(strategy: str) -> None:
    """The fusion strategy of defer_and_fuse flushes: 'greedy' (default) or 'none'."""
    _C.set_fusion(strategy)


def get_fusion() -> str:
    return _C.get_fusion()


def set_cpu_fallback(allowed: bool) -> None:
    """Let ops that are not lowered to the chip run on the CPU (warned once per op, counted)."""
    _C.set_cpu_fallback(bool(allowed))


def set_timing_only(on: bool) -> None:
    """Timing only: kernels are generated, planned, fused and timed as always, but no value is
    computed and tpu tensors hold no host bytes (HBM is still counted against the chip's capacity,
    so a model too large for it still raises torch.OutOfMemoryError). Values read back (.cpu(),
    .item(), printing) are zeros: placeholders. Programs whose control flow or addresses may depend
    on values are timed from those placeholders and counted in
    vtpu.stats()["timing_only_data_dependent"]; repeated launches of the others are answered by
    the timing memo (vtpu.stats()["timing_memo_hits"]). Pending work runs before the switch."""
    _C.set_timing_only(bool(on))


def is_timing_only() -> bool:
    return _C.timing_only()


@contextlib.contextmanager
def timing_only(on: bool = True):
    """`with vtpu.timing_only():` runs the block timing only (set_timing_only); pending work is
    flushed as the block ends, and the previous setting comes back. For a model larger than the
    host's memory, build it on the meta device and move it with `model.to_empty(device="tpu")`."""
    before = is_timing_only()
    set_timing_only(on)
    try:
        yield
    finally:
        set_timing_only(before)


def chip_name() -> str:
    return _C.chip_name()


def max_memory() -> dict[int, int]:
    """Free simulated HBM of every chip of this process, {index: bytes}: pass it as `max_memory=` to
    `from_pretrained(..., device_map="balanced")` (Transformers, Diffusers) to split a model over
    tpu:0..N-1 (VTPU_CHIPS=N). Accelerate, asked for the memory itself, offers only the current
    chip for device type "tpu" ("A TPU process can only use one chip"), as it would on real TPUs."""
    return {i: _device_module.mem_get_info(i)[0] for i in range(_C.device_count())}


def synchronize(device: int | None = None) -> None:
    """Runs all pending (deferred) work, on one device or all."""
    _C.synchronize(-1 if device is None else int(device))


def stats() -> dict:
    """Counters since the last reset_stats(): simulated cycles and seconds, HBM traffic, kernels,
    ops recorded / fused / dead, flushes, program- and plan-cache hits, planning time, CPU
    fallbacks ("cpu_fallbacks", by aten op), ops that ran as torch's decomposition on the chip
    ("decomposed", by aten op; "decomposition_declined": those whose decomposition did not apply
    and so fell back), HBM in use, per-kernel cycles ("per_kernel", by fused label), per-unit
    utilisation ("unit_utilisation"), compiled mode's compile and call times (vtpu.compiled), and
    what this rank's collectives carried over the interconnect ("interconnect", by collective:
    vtpu.distributed)."""
    return {**_C.stats(), **_decompositions.counts(), **_compiled.compile_stats(), "interconnect": distributed.stats()}


def cached_programs() -> list[str]:
    """Signatures of the kernel programs generated so far, sorted ("mm|1x64x768x256|...": kind,
    then sizes as the program was generated for them; rows and M are powers of two, since one
    program serves every row count up to that)."""
    return list(_C.cached_programs())


def reset_stats() -> None:
    _C.reset_stats()
    _decompositions.reset_counts()
    _compiled.reset_compile_stats()
    distributed.reset_stats()


@contextlib.contextmanager
def trace(path: str):
    """Records a Perfetto/Chrome timeline of every kernel that runs inside the block (pending
    work is flushed at the end) and writes it to `path` (open it at ui.perfetto.dev)."""
    _C.start_trace()
    try:
        yield
    finally:
        _C.stop_trace(str(path))


def _let_autograd_threads_finish() -> None:
    """torch's autograd runs a tpu backward on a device thread, which may drop the last reference
    to the finished graph task after backward() returned; that needs the GIL. If the main thread
    reaches interpreter shutdown first, the waiting thread is killed mid-C++ and the process aborts
    ("terminate called without an active exception", pytorch/pytorch#38228). Releasing the GIL
    for a moment at exit lets it finish."""
    import time

    time.sleep(0.02)


atexit.register(_let_autograd_threads_finish)


def _autoload() -> None:
    """Entry point for torch's device-backend autoload (`import torch` is enough once vtpu is
    installed). Importing this module did the registration."""
