"""Ops with several results that run on the CPU (inputs the chip's kernels do not take) run the
CPU op once per call, not once per result: each call counts one fallback, and every result
matches the CPU's (torch_bridge/csrc/record/op_support.h: run_on_cpu_outputs)."""
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


def test_integer_topk_runs_once():
    x = torch.randperm(120, generator=torch.Generator().manual_seed(1)).reshape(3, 40).to(torch.int32)  # distinct: one answer
    (values, indices), want, runs = run_once(lambda t: torch.topk(t, 5), x)
    assert runs == 1
    assert torch.equal(values.cpu(), want.values) and torch.equal(indices.cpu(), want.indices)


def module_grads(module, x, loss):
    """The gradients of loss(module(x)) for x and each parameter, in that order."""
    x = x.detach().requires_grad_()
    module.zero_grad(set_to_none=True)
    loss(module(x)).backward()
    return [x.grad, *(p.grad for p in module.parameters())]


def check_backward_runs_once(op, module, x, loss, tolerance):
    before = fallbacks(op)
    got = module_grads(module.to("tpu"), x.to("tpu"), loss)
    vtpu.synchronize()
    assert fallbacks(op) - before == 1
    want = module_grads(module.cpu(), x, loss)
    for g, w in zip(got, want):
        torch.testing.assert_close(g.cpu(), w, rtol=tolerance, atol=tolerance)


def test_layer_norm_over_two_dims_runs_on_the_chip():
    # it ran on the CPU (its three results once per call); now the trailing dims are flattened
    x = torch.randn(3, 4, 5, generator=torch.Generator().manual_seed(3))
    norm = torch.nn.LayerNorm([4, 5])
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
        norm.bias.uniform_(-0.5, 0.5)
    weighted = lambda y: (y * torch.arange(60.0, device=y.device).reshape(3, 4, 5)).sum()
    before = vtpu.stats()["cpu_fallback_ops"]
    got = module_grads(norm.to("tpu"), x.to("tpu"), weighted)
    vtpu.synchronize()
    assert vtpu.stats()["cpu_fallback_ops"] == before
    want = module_grads(norm.cpu(), x, weighted)
    for g, w in zip(got, want):
        torch.testing.assert_close(g.cpu(), w, rtol=1e-5, atol=1e-5)


class ConvolutionIn3d(torch.nn.Conv3d):
    """A 3-D convolution through aten::convolution itself (F.conv3d is composed of conv2d's on the
    chip, vtpu/convolution_3d.py): the lowered kernel takes 1 or 2 spatial dims, so this one, and
    its backward, fall back."""

    def forward(self, x):
        return torch.convolution(x, self.weight, self.bias, self.stride, self.padding, self.dilation, False, [0, 0, 0], 1)


def test_convolution_backward_with_three_outputs_runs_once():
    x = torch.randn(1, 2, 4, 4, 4, generator=torch.Generator().manual_seed(4))
    conv = ConvolutionIn3d(2, 3, 3, padding=1)
    check_backward_runs_once("convolution_backward_overrideable", conv, x, lambda y: y.square().sum(), 1e-4)
