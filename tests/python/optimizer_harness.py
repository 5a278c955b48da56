"""Differential testing against torch's optimizer database (torch.testing._internal.
common_optimizers.optim_db): every optimizer, with each of its sample configurations, in each
implementation it supports (the for-loop, foreach and fused forms), takes three steps on a small
model on "tpu" and on the CPU, under a StepLR schedule and clip_grad_norm_; the parameters and
the optimizer state must match. Used by scripts/optimizer_report.py (docs/optimizers.md) and
test_optimizers.py (a fixed sample in CI). Statuses as in opinfo_harness."""
from __future__ import annotations

import torch
from torch.utils._pytree import tree_map

from opinfo_harness import _compare, classify

IMPLS = ("forloop", "foreach", "fused")


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


def _steps(info, kwargs, device, steps=3):
    two_d_only = info.optim_cls.__name__ == "Muon"  # Muon orthogonalizes matrices only
    model = _model(device, two_d_only)
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

    def on_chip() -> str:
        got = _steps(info, kwargs, "tpu")
        return _compare(tree_map(lambda x: x.cpu() if isinstance(x, torch.Tensor) else x, got), want, (1e-5, 1e-4))

    return classify(on_chip)
