"""Differential testing against torch's optimizer database (torch.testing._internal.
common_optimizers.optim_db): every optimizer, with each of its sample configurations, in each
implementation it supports (the for-loop, foreach and fused forms), takes three steps on a small
model on "tpu" and on the CPU, under a StepLR schedule and clip_grad_norm_; the parameters and
the optimizer state must match. Used by scripts/optimizer_report.py (docs/optimizers.md) and
test_optimizers.py (a fixed sample in CI). Statuses as in opinfo_harness; a mismatch names how
far the chip's parameters are from the CPU's next to how far the CPU's own move under one-ulp
nudges of its initial parameters (below)."""
from __future__ import annotations

import torch
from torch.utils._pytree import tree_map

from opinfo_harness import _compare, classify

IMPLS = ("forloop", "foreach", "fused")
STATUSES = ("native", "fallback", "mismatch", "unsupported", "error")  # each worse than the one before


def worst_status(counts) -> str:
    """The worst status among those counted: a report's cell."""
    return max((s for s in counts if counts[s]), key=STATUSES.index)


def impl_kwargs(info, impl) -> dict | None:
    """The constructor flags of an implementation, or None where the optimizer has no such form."""
    if impl == "forloop":
        return {"foreach": False} if "foreach" in info.supported_impls else {}
    if impl not in info.supported_impls:
        return None
    return {impl: True}


def _model(device, two_d_only):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(5, 6, bias=not two_d_only), torch.nn.Tanh(),
                                torch.nn.Linear(6, 2, bias=not two_d_only))
    return model.to(device)


def _steps(info, kwargs, device, steps=3, nudge=None):
    two_d_only = info.optim_cls.__name__ == "Muon"  # Muon orthogonalizes matrices only
    model = _model(device, two_d_only)
    if nudge is not None:  # every initial parameter one ulp up or down, the signs drawn from seed `nudge`
        signs = torch.Generator().manual_seed(nudge)
        with torch.no_grad():
            for p in model.parameters():
                toward = (torch.randint(0, 2, p.shape, generator=signs) * 2 - 1) * float("inf")
                p.copy_(torch.nextafter(p, toward.to(p.dtype)))
    optimizer = info.optim_cls(model.parameters(), **kwargs)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1, gamma=0.7) if not isinstance(kwargs.get("lr"), torch.Tensor) else None
    for i in range(steps):
        x = torch.randn(4, 5, generator=torch.Generator().manual_seed(i)).to(device)

        def closure():
            optimizer.zero_grad()
            loss = model(x).square().mean()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            return loss

        if info.step_requires_closure:
            optimizer.step(closure)
        else:
            closure()
            optimizer.step()
        if scheduler:
            scheduler.step()
    state = [{k: v for k, v in s.items()} for s in optimizer.state.values()]
    return [p.detach() for p in model.parameters()], state


def run_case(info, optim_input, impl) -> tuple[str, str]:
    flags = impl_kwargs(info, impl)
    if flags is None or info.only_supports_sparse_grads:
        return "skip", ""
    kwargs = {**optim_input.kwargs, **flags}
    try:
        want = _steps(info, kwargs, "cpu")
    except Exception:
        return "skip", ""

    got = []

    def on_chip() -> str:
        got[:] = [tree_map(lambda x: x.cpu() if isinstance(x, torch.Tensor) else x, _steps(info, kwargs, "tpu"))]
        return _compare(got[0], want, (1e-5, 1e-4))

    status, problem = classify(on_chip)
    if status == "mismatch" and got:
        nudged = [_steps(info, kwargs, "cpu", nudge=seed)[0] for seed in range(NUDGES)]
        problem = f"{problem} {rounding_spread(got[0][0], want[0], nudged)}"
    return status, problem


NUDGES = 4


def max_deviation(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    """The largest difference between two lists of parameters, each relative to the largest
    magnitude of b's tensor."""
    return max(float((x.double() - y.double()).abs().max() / y.double().abs().max().clamp(min=1e-30)) for x, y in zip(a, b))


def rounding_spread(got, want, want_nudged) -> str:
    """Some optimizers amplify rounding (LBFGS: its curvature pair y = g1 - g0 cancels when a step
    barely moves the gradient, and its line search branches on the losses it compares), so the
    chip, whose reductions sum in another order than MKL's, cannot match them bit for bit. How
    much the CPU's own answer moves when its initial parameters move by one ulp (the largest of
    NUDGES runs with random directions) says how far apart two valid f32 runs can land; it is
    printed beside the chip's deviation, and the status stays a mismatch."""
    chip, own = max_deviation(got, want), max(max_deviation(n, want) for n in want_nudged)
    return f"(parameters off by {chip:.2g} of their largest; the CPU's own after one-ulp nudges: up to {own:.2g})"
