"""Compiled mode: torch.compile(model, backend="tpu").

Dynamo captures graphs; AOT autograd turns each into a forward and a backward graph of aten ops
(functionalized, so no in-place ops or aliasing inside). Each aten graph is lowered into the
kernels' op graph by running it through the tpu device's lowerings with deferral forced on, then
fused and memory-planned by the same planner as defer_and_fuse and run as one flush. The flush's
plan is cached by graph signature (ops, shapes, dtypes), so later calls with the same shapes skip
fusion, memory planning and kernel generation.

Shapes: with dynamic=True Dynamo traces symbolic sizes and does not recompile for new sequence
lengths; the chip's kernels are specialised to concrete shapes (the ISA's loops and DMA
descriptors take sizes as immediates), so a new shape costs one plan and its new programs, cached
from then on. Code between graphs (graph breaks) runs in the current eager mode.

Registered under the "torch_dynamo_backends" entry point, so `import torch` is enough.
"""
from __future__ import annotations

import contextlib
import time

import torch

from . import _C

_stats = {"compiled_graphs": 0, "compile_seconds": 0.0, "first_call_seconds": 0.0, "compiled_calls": 0,
          "cached_call_seconds": 0.0}


def compile_stats() -> dict:
    """Compiled-mode counters since the last reset: graphs compiled (forward and backward count
    separately), host seconds in the backend (AOT autograd tracing and partitioning), host seconds
    of each graph's first call (planning and kernel generation included) and of the later calls."""
    return dict(_stats)


def reset_compile_stats() -> None:
    for key in _stats:
        _stats[key] = type(_stats[key])()


@contextlib.contextmanager
def _fused_region():
    """Ops inside are deferred and run as one flush at the end. Entering flushes pending eager work,
    so the flushed graph is exactly the compiled graph and its plan is found again next call."""
    previous = _C.get_mode()
    _C.set_mode("defer_and_fuse")
    try:
        yield
    finally:
        _C.set_mode(previous)  # flushes the region


def _lower(gm: torch.fx.GraphModule, example_inputs):
    """An aten graph from AOT autograd -> a boxed callable running it on the chip as one plan."""
    from functorch.compile import make_boxed_func

    _stats["compiled_graphs"] += 1
    called = False

    def run(*args):
        nonlocal called
        started = time.perf_counter()
        with _fused_region():
            outputs = gm(*args)
        elapsed = time.perf_counter() - started
        if called:
            _stats["compiled_calls"] += 1
            _stats["cached_call_seconds"] += elapsed
        else:
            called = True
            _stats["first_call_seconds"] += elapsed
        return outputs

    return make_boxed_func(run)


def tpu_backend(gm: torch.fx.GraphModule, example_inputs):
    """The Dynamo backend "tpu"."""
    from torch._dynamo.backends.common import aot_autograd

    started = time.perf_counter()
    compiled = aot_autograd(fw_compiler=_lower, bw_compiler=_lower)(gm, example_inputs)
    _stats["compile_seconds"] += time.perf_counter() - started
    return compiled


def _route_default_backend_to_tpu() -> None:
    """torch.compile(model) without a backend means Inductor, which in torch 2.13 maps a device
    named "tpu" to its Pallas code generator (and fails: "No module named 'jax'"). Graphs whose
    inputs live on the virtual chip go to backend "tpu" instead, as if the user had passed it;
    every other graph still goes to Inductor."""
    wrapper = torch._TorchCompileInductorWrapper
    if getattr(wrapper, "_vtpu_routed", False):
        return
    inductor_call = wrapper.__call__

    def call(self, model_, inputs_, *, config_patches=None):
        if any(isinstance(t, torch.Tensor) and t.device.type == "tpu" for t in inputs_):
            return tpu_backend(model_, inputs_)
        return inductor_call(self, model_, inputs_, config_patches=config_patches)

    wrapper.__call__ = call
    wrapper._vtpu_routed = True


_route_default_backend_to_tpu()
