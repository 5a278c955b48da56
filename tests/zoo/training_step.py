"""The zoo's training column: one training step of a shrunk architecture (tests/zoo/harness.py) on
the CPU and natively on "tpu" (defer_and_fuse, CPU fallback off): forward, a mean-squared-error
loss of every floating-point output against fixed random targets of its shape (the base models
have no heads of their own to take labels), backward, and one AdamW step.

The model stays in eval mode so dropout draws nothing (the chip's random numbers are not the
CPU's). It passes when every op ran on the chip, the loss is within the harness's tolerance of the
CPU's, every gradient is within it relative to the largest gradient, and the parameters after the
step are within it as the forward outputs are compared (the step moves them by about lr = 1e-4).
"""
from __future__ import annotations

import copy

import torch

import harness

LEARNING_RATE = 1e-4


def _step(model, inputs: dict, device: str) -> tuple:
    """(loss, gradients, parameters after the step) of one AdamW step on `device`, on the CPU."""
    m = copy.deepcopy(model).to(device)
    params = [p for p in m.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=LEARNING_RATE)
    torch.manual_seed(0)
    outputs = harness.float_tensors(m(**{k: v.to(device) for k, v in inputs.items()}))
    g = torch.Generator().manual_seed(1)
    targets = [torch.randn(o.shape, generator=g).to(device) for o in outputs]
    loss = sum(torch.nn.functional.mse_loss(o.float(), t) for o, t in zip(outputs, targets))
    loss.backward()
    grads = [p.grad.detach().cpu() if p.grad is not None else None for p in params]
    optimizer.step()
    return loss.detach().cpu(), grads, [p.detach().cpu() for p in params]


def _gradient_error(expected: list, got: list) -> float:
    """Largest gradient difference relative to the largest gradient (inf on a structural one)."""
    if [e is None for e in expected] != [g is None for g in got]:
        return float("inf")
    pairs = [(e, g) for e, g in zip(expected, got) if e is not None]
    scale = max((e.abs().max().item() for e, _ in pairs if e.numel()), default=0.0)
    if any(not torch.isfinite(g).all() for _, g in pairs):
        return float("inf")
    worst = max(((e - g).abs().max().item() for e, g in pairs if e.numel()), default=0.0)
    return worst / scale if scale > 0 else worst


def run_training(model, inputs: dict) -> dict:
    """{'status': 'pass' | 'mismatch' | 'error' | 'cpu_error', ...} for one training step."""
    import vtpu

    try:
        expected = _step(model, inputs, "cpu")
    except Exception as e:  # noqa: BLE001  (a model the CPU cannot train: not counted)
        return {"status": "cpu_error", "error": f"{type(e).__name__}: {harness.first_line(e)}"}
    vtpu.set_cpu_fallback(False)
    vtpu.set_mode("defer_and_fuse")
    try:
        got = _step(model, inputs, "tpu")
        vtpu.synchronize()
    except Exception as e:  # noqa: BLE001
        return {"status": "error", "failing_op": harness.failing_aten_op(e), "error": harness.first_line(e)}
    errors = {"loss": harness.compare([expected[0]], [got[0]]), "gradients": _gradient_error(expected[1], got[1]),
              "parameters": harness.compare(expected[2], got[2])}
    return {"status": "pass" if max(errors.values()) <= harness.TOLERANCE else "mismatch", "errors": errors}
