#!/usr/bin/env python3
"""Accuracy of vtpu's iterative compositions beside the CPU's kernels, both in float32 and both
measured against float64's answer for the same input: the Jacobi SVD (vtpu/linalg_svd.py) and
eigh (vtpu/linalg_eigh.py) against LAPACK's, matrix_exp (vtpu/matrix_exp.py) at OpInfo-sized
norms, and logcumsumexp's gradient (vtpu/scans.py: autograd through the scan) against torch's
formula at OpInfo's magnitudes. Errors are the largest absolute error over the largest |value|
of the float64 answer; the ratio is the chip's over the CPU's.

Usage: PYTHONPATH=torch_bridge/python python3 bench/linalg_accuracy.py
"""
import torch

import vtpu  # noqa: F401


def relative(result, truth) -> float:
    return ((result.double().cpu() - truth).abs().max() / truth.abs().max()).item()


def logcumsumexp_gradient(x, g):
    x = x.clone().requires_grad_()
    return torch.autograd.grad(torch.logcumsumexp(x, 1), x, g.to(x.device))[0]


def main() -> None:
    gen = torch.Generator().manual_seed(0)
    cases = []
    for n in (5, 32, 64, 128):
        a = torch.randn(n + 7, n, generator=gen, dtype=torch.float64)
        cases.append((f"svdvals [{n + 7}, {n}]", torch.linalg.svdvals, a))
    for n in (5, 33, 64):
        a = torch.randn(n, n, generator=gen, dtype=torch.float64)
        cases.append((f"eigvalsh [{n}, {n}]", torch.linalg.eigvalsh, a + a.mT))
    for scale in (0.5, 5.0):
        a = torch.randn(5, 5, 5, generator=gen, dtype=torch.float64) * scale
        cases.append((f"matrix_exp [5, 5, 5], 1-norm up to {a.abs().sum(-2).amax().item():.0f}", torch.linalg.matrix_exp, a))
    x = torch.randn(5, 5, 5, generator=gen, dtype=torch.float64) * 3000
    g = torch.randn(5, 5, 5, generator=gen, dtype=torch.float64)
    cases.append(("logcumsumexp gradient, |x| up to 1e4", lambda t: logcumsumexp_gradient(t, g.to(t.dtype)), x))
    print(f"{'workload':44} {'chip error':>11} {'CPU error':>11} {'ratio':>8}")
    for name, fn, a in cases:
        truth = fn(a)
        chip, cpu = relative(fn(a.float().to("tpu")), truth), relative(fn(a.float()), truth)
        print(f"{name:44} {chip:11.2e} {cpu:11.2e} {chip / cpu:8.2f}")


if __name__ == "__main__":
    main()
