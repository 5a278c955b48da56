"""Layer norm, variance, argmax and other reductions over rows longer than a row kernel takes
(65,536 elements), forward and backward on the chip against the CPU: rows that split evenly
(128,256: Llama 3's vocabulary) and rows of a prime length, which have no divisor to split them
by and are padded instead."""
import pytest
import torch
import torch.nn.functional as F

import vtpu

PRIME = 65537  # one past a row kernel's longest row


@pytest.fixture(autouse=True)
def stays_on_the_chip(no_fallback):
    yield
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def _layer_norm_and_grads(x, w, b, shape, grad):
    x, w, b = (t.clone().requires_grad_() for t in (x, w, b))
    out = F.layer_norm(x, shape, w, b)
    out.backward(grad)
    return out.detach().cpu(), x.grad.cpu(), w.grad.cpu(), b.grad.cpu()


@pytest.mark.parametrize("shape", [(128256,), (PRIME,), (3, 40000)], ids=["even", "prime", "two-dims"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_layer_norm_over_long_rows_forward_and_backward(shape, dtype):
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(2, *shape, generator=g) * 3 + 1).to(dtype)
    w, b = torch.randn(*shape, generator=g).to(dtype), torch.randn(*shape, generator=g).to(dtype)
    grad = torch.randn(2, *shape, generator=g).to(dtype)
    want = _layer_norm_and_grads(x, w, b, shape, grad)
    got = _layer_norm_and_grads(*(t.to("tpu") for t in (x, w, b)), shape, grad.to("tpu"))
    assert got[0].dtype == dtype
    if dtype == torch.float32:
        tolerances = [dict(rtol=1e-4, atol=1e-5)] * 2 + [dict(rtol=1e-4, atol=1e-3)] * 2  # dw, db: sums of 2 rows
    else:  # bf16 values near 4 are 1/64 apart; dw and db add 2 terms up to ~8, rounded to bf16
        # (1/16 apart there) before a sum that cancels, as the short rows' kernels do
        tolerances = [dict(rtol=1.6e-2, atol=3e-2)] * 2 + [dict(rtol=1.6e-2, atol=6.25e-2)] * 2
    for name, a, e, tol in zip(("out", "dx", "dw", "db"), got, want, tolerances):
        torch.testing.assert_close(a, e, **tol, msg=lambda m, name=name: f"{name}: {m}")


@pytest.mark.parametrize("reduction", ["sum", "mean", "amax", "amin", "prod"])
def test_reductions_over_a_prime_long_row_carry_nan_and_inf(reduction):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(4, PRIME, generator=g)
    x[1, 70] = float("nan")
    x[2, 5] = float("inf")
    x[3, PRIME - 1] = -float("inf")
    if reduction == "prod":  # a product of 65,537 normals under- or overflows: keep it finite
        x[0] = 1 + x[0] / 1000
    want = getattr(x, reduction)(-1)
    got = getattr(x.to("tpu"), reduction)(-1).cpu()
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4, equal_nan=True)


@pytest.mark.parametrize("length", [70000, PRIME])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_variance_over_long_rows(length, dtype):
    x = (torch.randn(4, length, generator=torch.Generator().manual_seed(3)) * 2 + 5).to(dtype)
    x[1, 3] = float("nan")
    x[2, 9] = float("inf")
    dev = x.to("tpu")
    for correction in (0, 1):
        torch.testing.assert_close(torch.var(dev, -1, correction=correction).cpu(), torch.var(x, -1, correction=correction),
                                   rtol=1e-5, atol=0, equal_nan=True)
    torch.testing.assert_close(torch.std(dev, -1).cpu(), torch.std(x, -1), rtol=1e-5, atol=0, equal_nan=True)


@pytest.mark.parametrize("length", [70000, PRIME])
def test_argmax_and_argmin_over_long_rows_take_the_first_extreme_or_nan(length):
    x = torch.randn(4, length, generator=torch.Generator().manual_seed(4))
    x[1, 3] = x[1, 60000] = float("nan")  # the first NaN wins
    x[2, 9] = float("inf")
    x[3, length - 5] = x[3, length - 1] = 100  # a tie: the first
    x[3, 7] = x[3, 70] = -100
    dev = x.to("tpu")
    for op in ("argmax", "argmin"):
        assert torch.equal(getattr(dev, op)(-1).cpu(), getattr(x, op)(-1)), op
        assert torch.equal(getattr(dev, op)().cpu(), getattr(x, op)()), op  # over all 4 x length
    assert torch.equal(dev.max(-1).indices.cpu(), x.max(-1).indices)


def test_softmax_over_a_prime_long_row():
    x = torch.randn(2, PRIME, generator=torch.Generator().manual_seed(2)) * 4
    torch.testing.assert_close(F.softmax(x.to("tpu"), -1).cpu(), F.softmax(x, -1), rtol=1e-4, atol=1e-7)
