"""Matmuls whose full-size blocks do not fit a chip's VMEM run in smaller ones (the matmul
schedule shrinks its blocks), so ordinary f32 training runs on v4's 16 MiB VMEM: a weight
gradient's K is the number of tokens. A K too long for even the smallest blocks (an LM head's
input gradient: K is the vocabulary) is split into matmuls whose products are summed."""

import json

import pytest
import torch

import vtpu


def test_f32_linear_training_step_on_v4_matches_the_cpu(run_isolated):
    done = run_isolated("""
        import json, torch, vtpu
        torch.manual_seed(0)
        layer = torch.nn.Linear(256, 384)
        x = torch.randn(2048, 256)  # 2048 tokens: the weight gradient is [384, 2048] @ [2048, 256] in f32
        layer(x).square().mean().backward()
        want = layer.weight.grad.clone()
        layer.zero_grad()
        layer.to("tpu")
        layer(x.to("tpu")).square().mean().backward()
        got = layer.weight.grad.cpu()
        print(json.dumps({"err": (got - want).abs().max().item(), "scale": want.abs().max().item(),
                          "launches": vtpu.stats()["kernels_launched"], "fallbacks": vtpu.stats()["cpu_fallback_ops"]}))
    """, VTPU_CHIP="v4")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["launches"] > 0 and result["fallbacks"] == 0
    assert result["err"] <= 1e-5 * result["scale"]


K_TOO_LONG = {
    "mm, an LM head's input gradient": (lambda a, b: a @ b, (27, 50257), (50257, 64)),
    "a transposed weight": (lambda a, b: a @ b.t(), (27, 50257), (64, 50257)),
    "bmm": (lambda a, b: a @ b.transpose(-1, -2), (1, 4, 65536), (1, 32, 65536)),
    "addmm": (lambda a, b: torch.addmm(torch.ones(b.shape[-1], device=a.device), a, b), (9, 40000), (40000, 32)),
}


@pytest.mark.parametrize("name", K_TOO_LONG)
def test_a_k_too_long_for_vmem_is_split_and_summed(name, native_in_each_eager_mode):
    fn, a_shape, b_shape = K_TOO_LONG[name]
    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(a_shape, generator=gen), torch.randn(b_shape, generator=gen)
    vtpu.reset_stats()
    got = fn(a.to("tpu"), b.to("tpu")).cpu()
    want = fn(a, b)
    assert (got - want).abs().max() <= 1e-5 * want.abs().max()
    assert vtpu.stats()["per_kernel"], "ran on the chip"
