"""Ops with several results that run on the CPU (inputs the chip's kernels do not take) run the
CPU op once per call, not once per result: each call counts one fallback, and every result
matches the CPU's (torch_bridge/csrc/ops_support.h: run_on_cpu_outputs)."""
import pytest
import torch

import vtpu


def fallbacks(op):
    return vtpu.stats()["cpu_fallbacks"].get(f"aten::{op}", 0)


def run_once(fn, *inputs):
    """fn on tpu copies of `inputs` and on the CPU; the tpu results, the CPU results and how many
    CPU ops ran for the call (of any name)."""
    before = vtpu.stats()["cpu_fallback_ops"]
    got = fn(*(x.to("tpu") for x in inputs))
    vtpu.synchronize()
    return got, fn(*inputs), vtpu.stats()["cpu_fallback_ops"] - before


@pytest.fixture(autouse=True)
def fallback_on(cpu_fallback):
    vtpu.reset_stats()
    yield


def test_topk_beyond_16_runs_once():
    x = torch.randn(3, 40, generator=torch.Generator().manual_seed(1))
    (values, indices), want, runs = run_once(lambda t: torch.topk(t, 17), x)
    assert runs == 1
    assert torch.equal(values.cpu(), want.values) and torch.equal(indices.cpu(), want.indices)


def test_integer_max_over_a_dim_runs_once():
    x = torch.randint(-50, 50, (4, 9), generator=torch.Generator().manual_seed(2), dtype=torch.int32)
    (values, indices), want, runs = run_once(lambda t: t.max(dim=1), x)
    assert runs == 1
    assert torch.equal(values.cpu(), want.values) and torch.equal(indices.cpu(), want.indices)


def test_layer_norm_over_two_dims_backward_runs_once():
    x = torch.randn(3, 4, 5, generator=torch.Generator().manual_seed(3))
    norm = torch.nn.LayerNorm([4, 5])
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
        norm.bias.uniform_(-0.5, 0.5)

    def grads(norm, x):
        x = x.detach().requires_grad_()
        norm.zero_grad(set_to_none=True)
        (norm(x) * torch.arange(60.0, device=x.device).reshape(3, 4, 5)).sum().backward()
        return x.grad, norm.weight.grad, norm.bias.grad

    before = fallbacks("native_layer_norm_backward")
    got = grads(norm.to("tpu"), x.to("tpu"))
    vtpu.synchronize()
    assert fallbacks("native_layer_norm_backward") - before == 1
    want = grads(norm.cpu(), x)
    for g, w in zip(got, want):
        torch.testing.assert_close(g.cpu(), w, rtol=1e-5, atol=1e-5)


def test_conv3d_backward_runs_once():
    x = torch.randn(1, 2, 4, 4, 4, generator=torch.Generator().manual_seed(4))
    conv = torch.nn.Conv3d(2, 3, 3, padding=1)

    def grads(conv, x):
        x = x.detach().requires_grad_()
        conv.zero_grad(set_to_none=True)
        conv(x).square().sum().backward()
        return x.grad, conv.weight.grad, conv.bias.grad

    before = fallbacks("convolution_backward_overrideable")
    got = grads(conv.to("tpu"), x.to("tpu"))
    vtpu.synchronize()
    assert fallbacks("convolution_backward_overrideable") - before == 1
    want = grads(conv.cpu(), x)
    for g, w in zip(got, want):
        torch.testing.assert_close(g.cpu(), w, rtol=1e-4, atol=1e-4)
