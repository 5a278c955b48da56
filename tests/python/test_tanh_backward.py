"""tanh's gradient, g (1 - y^2), with 1 - y^2 as one fused multiply-add as torch's CPU kernel
computes it (csrc/aten/backward.cc). torch's decomposition rounds y^2 first, which cancels where
tanh saturates: the chip's gradient was 1445 ulps off at y = 0.99983, the CPU's within 2."""
import pytest
import torch

import vtpu  # noqa: F401


def _inputs(dtype, n=4096):
    torch.manual_seed(0)
    y = torch.tanh(torch.randn(n) * 4).to(dtype)  # many saturated values
    return torch.randn(n).to(dtype), y


def test_float32_equals_the_cpu_bit_for_bit(no_fallback):
    g, y = _inputs(torch.float32)
    want = torch.ops.aten.tanh_backward(g, y)
    got = torch.ops.aten.tanh_backward(g.to("tpu"), y.to("tpu")).cpu()
    assert torch.equal(got, want), (got - want).abs().max()
    exact = torch.ops.aten.tanh_backward(g.double(), y.double())
    assert ((got.double() - exact).abs() <= 4 * 2**-24 * exact.abs()).all()  # a few ulps, saturated or not


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_16_bit_within_an_ulp_of_the_cpu(dtype, no_fallback):
    g, y = _inputs(dtype)
    want = torch.ops.aten.tanh_backward(g, y).float()
    got = torch.ops.aten.tanh_backward(g.to("tpu"), y.to("tpu")).cpu()
    assert got.dtype == dtype
    assert ((got.float() - want).abs() <= torch.finfo(dtype).eps * want.abs() + torch.finfo(dtype).tiny).all()


def test_out_form_and_nn_tanh_gradient(no_fallback):
    g, y = _inputs(torch.float32, 64)
    out = torch.empty(64, device="tpu")
    torch.ops.aten.tanh_backward.grad_input(g.to("tpu"), y.to("tpu"), grad_input=out)
    assert torch.equal(out.cpu(), torch.ops.aten.tanh_backward(g, y))
    x = (torch.randn(8, 16) * 3).requires_grad_()
    xt = x.detach().to("tpu").requires_grad_()
    torch.tanh(x).sum().backward()
    torch.tanh(xt).sum().backward()
    torch.testing.assert_close(xt.grad.cpu(), x.grad, rtol=0, atol=2e-7)


def test_complex_takes_torchs_formula():
    torch.manual_seed(1)
    g, y = torch.randn(32, dtype=torch.complex64), torch.tanh(torch.randn(32, dtype=torch.complex64))
    got = torch.ops.aten.tanh_backward(g.to("tpu"), y.to("tpu")).cpu()
    torch.testing.assert_close(got, torch.ops.aten.tanh_backward(g, y), rtol=1e-6, atol=1e-6)
