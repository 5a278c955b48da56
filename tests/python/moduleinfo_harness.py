"""Differential testing against PyTorch's ModuleInfo database (torch.testing._internal.
common_modules.module_db): each module is built from its first samples' constructor arguments,
copied to "tpu", and run forward and backward (the gradients of a fixed weighted sum of the
outputs with respect to the inputs and every parameter) in training and in eval mode, on the chip
and on the CPU. Used by scripts/moduleinfo_report.py (docs/moduleinfo.md) and by
test_moduleinfo.py (a fixed sample in CI).

Statuses as in opinfo_harness: native (no CPU op at all), fallback (matched with some aten op on the
CPU, named), mismatch, unsupported (failed even with the fallback), error; random modules
(dropout) compare shapes only.
"""
from __future__ import annotations

import copy

import torch
from torch.utils._pytree import tree_map

from opinfo_harness import OpResult, _compare, _compare_shapes, _weights_like, classify

# Modules whose outputs are drawn from a generator (the chip's Philox stream is not the CPU's).
RANDOM = ("nn.Dropout", "nn.Dropout1d", "nn.Dropout2d", "nn.Dropout3d", "nn.AlphaDropout", "nn.FeatureAlphaDropout",
          "nn.FractionalMaxPool2d", "nn.FractionalMaxPool3d", "nn.RReLU")


def _tensors(value) -> list:
    leaves = []
    tree_map(lambda x: leaves.append(x) if isinstance(x, torch.Tensor) else None, value)
    return leaves


def _forward_backward(module, sample, device):
    def leaf(x):
        if not isinstance(x, torch.Tensor):
            return x
        return x.detach().to(device).requires_grad_(x.requires_grad)

    args, kwargs = tree_map(leaf, (sample.forward_input.args, sample.forward_input.kwargs))
    outputs = module(*args, **kwargs)
    floating = [o for o in _tensors(outputs) if o.is_floating_point() and o.requires_grad]
    inputs = [t for t in _tensors((args, kwargs)) if t.requires_grad] + [p for p in module.parameters() if p.requires_grad]
    grads = []
    if floating and inputs:
        total = sum((o * w.to(o.device)).sum() for o, w in zip(floating, _weights_like(floating)))
        grads = [g if g is not None else torch.zeros_like(i)
                 for g, i in zip(torch.autograd.grad(total, inputs, allow_unused=True), inputs)]
    buffers = [b for b in module.buffers()]  # running statistics must follow the CPU's too
    return [tree_map(lambda x: x.detach() if isinstance(x, torch.Tensor) else x, outputs), grads, buffers]


def run_sample(module_info, sample, training: bool) -> tuple[str, str]:
    torch.manual_seed(0)
    try:
        reference = module_info.module_cls(*sample.constructor_input.args, **sample.constructor_input.kwargs)
        reference.train(training)
        if module_info.is_lazy:  # materialized on the CPU first, so both copies start from the same weights
            with torch.no_grad():
                args, kwargs = tree_map(lambda x: x.detach() if isinstance(x, torch.Tensor) else x,
                                        (sample.forward_input.args, sample.forward_input.kwargs))
                reference(*args, **kwargs)
        chip_module = copy.deepcopy(reference)
        want = _forward_backward(reference, sample, "cpu")
    except Exception:
        return "skip", ""
    random = module_info.name in RANDOM

    def on_chip() -> str:
        got = _forward_backward(copy.deepcopy(chip_module).to("tpu"), sample, "tpu")
        return _compare_shapes(got, want) if random else _compare(got, want)

    return classify(on_chip)


def run_module(module_info, max_samples=2) -> OpResult:
    """Training and eval, the first `max_samples` samples of each; the worst status wins."""
    result = OpResult(module_info.name, {})
    problems = {}
    for training in (True, False):
        try:
            samples = module_info.module_inputs_func(module_info, device="cpu", dtype=torch.float32,
                                                     requires_grad=True, training=training)[:max_samples]
        except Exception as e:
            result.counts["error"] = result.counts.get("error", 0) + 1
            problems.setdefault("error", f"module_inputs_func: {type(e).__name__}")
            continue
        for sample in samples:
            status, problem = run_sample(module_info, sample, training)
            if status == "skip":
                continue
            result.counts[status] = result.counts.get(status, 0) + 1
            if problem:
                problems.setdefault(status, ("train: " if training else "eval: ") + problem)
    result.first_problem = problems.get(result.status, "")
    return result
