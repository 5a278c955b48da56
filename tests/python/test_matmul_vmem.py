"""Matmuls whose full-size blocks do not fit a chip's VMEM run in smaller ones (the matmul
schedule shrinks its blocks), so ordinary f32 training runs on v4's 16 MiB VMEM: a weight
gradient's K is the number of tokens."""

import json


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
