#!/usr/bin/env python3
"""How far the CPU's float32 training gradients and the chip's are from a float64 reference, for
zoo architectures whose training step mismatches (docs/zoo.md). When the CPU's own f32 gradients
are as far from f64 as the chip's, the step is ill-conditioned in f32 (a bias gradient that sums
large cancelling terms) and neither device's f32 answer is closer to the truth.

Usage: PYTHONPATH=torch_bridge/python python3 scripts/zoo_f64_check.py univnet [more model types]
The step is tests/zoo/training_step.py's (forward, MSE loss against fixed random targets, backward)
with the CPU fallback off on tpu; errors are relative to the largest f64 gradient.
"""
import copy
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests" / "zoo"))
import harness  # noqa: E402


def gradients(model, inputs: dict, device: str, dtype: torch.dtype) -> dict:
    m = copy.deepcopy(model).to(device=device, dtype=dtype)
    outputs = harness.float_tensors(m(**{k: v.to(device=device, dtype=dtype) if v.is_floating_point() else v.to(device)
                                         for k, v in inputs.items()}))
    g = torch.Generator().manual_seed(1)
    targets = [torch.randn(o.shape, generator=g).to(device=device, dtype=dtype) for o in outputs]
    sum(torch.nn.functional.mse_loss(o.to(dtype), t) for o, t in zip(outputs, targets)).backward()
    return {n: p.grad.detach().cpu().double() for n, p in m.named_parameters() if p.grad is not None}


def main(model_types: list[str]) -> None:
    import vtpu

    vtpu.set_cpu_fallback(False)
    for model_type in model_types:
        model, config = harness.build_model(model_type)
        inputs = harness.make_inputs(model, config)
        exact = gradients(model, inputs, "cpu", torch.float64)
        cpu = gradients(model, inputs, "cpu", torch.float32)
        chip = gradients(model, inputs, "tpu", torch.float32)
        largest = max(g.abs().max().item() for g in exact.values())

        def error(got: dict, name: str) -> float:
            return (got[name] - exact[name]).abs().max().item() / largest

        worst = max(exact, key=lambda n: error(chip, n))
        print(f"{model_type}: largest gradient error vs float64 (relative to the largest gradient): "
              f"cpu f32 {max(error(cpu, n) for n in exact):.2e}, tpu f32 {max(error(chip, n) for n in exact):.2e}; "
              f"chip vs cpu {max((chip[n] - cpu[n]).abs().max().item() for n in exact) / largest:.2e}; "
              f"worst parameter on tpu: {worst} (cpu {error(cpu, worst):.2e}, tpu {error(chip, worst):.2e})")


if __name__ == "__main__":
    main(sys.argv[1:] or ["univnet"])
