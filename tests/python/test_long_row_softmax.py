"""softmax, log_softmax and cross_entropy over rows longer than a row kernel takes (65,536: Llama
3's vocabulary has 128,256 entries), forward and backward on the chip against the CPU."""
import pytest
import torch
import torch.nn.functional as F

import vtpu

VOCABULARY = 128256  # Llama 3's


@pytest.fixture(autouse=True)
def stays_on_the_chip(no_fallback):
    yield
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def _no_worse_than_the_cpu(got, cpu, exact):
    """float32: got's error against the float64 result at most the CPU's own (a sum of 128K terms in
    another order differs from the CPU's by more than a tight tolerance, in either direction)."""
    worst_cpu = (cpu.double() - exact).abs().max().item()
    assert (got.double() - exact).abs().max().item() <= 2 * worst_cpu + 1e-6


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_softmax_over_long_rows_forward_and_backward(log, dtype):
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(3, VOCABULARY, generator=g) * 4).to(dtype)
    x[1, 5] = 60  # a dominant entry: the shift by the row maximum keeps exp finite
    grad = torch.randn(3, VOCABULARY, generator=g).to(dtype)
    fn = F.log_softmax if log else F.softmax
    cpu = x.clone().requires_grad_()
    dev = x.to("tpu").requires_grad_()
    exact = x.double().requires_grad_()
    want, got, best = fn(cpu, -1), fn(dev, -1), fn(exact, -1)
    want.backward(grad)
    got.backward(grad.to("tpu"))
    best.backward(grad.double())
    assert got.dtype == dtype
    if dtype == torch.float32:
        _no_worse_than_the_cpu(got.cpu(), want.detach(), best.detach())
        _no_worse_than_the_cpu(dev.grad.cpu(), cpu.grad, exact.grad)
    else:
        torch.testing.assert_close(got.cpu(), want.detach(), rtol=1.6e-2, atol=1e-2)
        torch.testing.assert_close(dev.grad.cpu(), cpu.grad, rtol=1.6e-2, atol=1e-2)


def test_softmax_over_long_rows_keeps_torch_s_half_to_float():
    x = torch.randn(2, VOCABULARY).to(torch.bfloat16)
    got = torch.ops.aten._log_softmax(x.to("tpu"), -1, True)
    assert got.dtype == torch.float32
    # (torch's CPU kernel refuses half_to_float; the same in f32 is what it means)
    _no_worse_than_the_cpu(got.cpu(), F.log_softmax(x.float(), -1), F.log_softmax(x.double(), -1))


def test_cross_entropy_over_a_llama_3_vocabulary():
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(16, VOCABULARY, generator=g).requires_grad_()
    labels = torch.randint(0, VOCABULARY, (16,), generator=g)
    labels[3] = -100  # ignored, as padding is
    dev = logits.detach().to("tpu").requires_grad_()
    want = F.cross_entropy(logits, labels)
    got = F.cross_entropy(dev, labels.to("tpu"))
    want.backward()
    got.backward()
    torch.testing.assert_close(got.cpu(), want.detach(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(dev.grad.cpu(), logits.grad, rtol=1e-5, atol=1e-8)
