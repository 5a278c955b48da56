"""torch.cdist's direct path on the chip (torch_bridge/csrc/aten/cdist.cc: _cdist_forward and
_cdist_backward from pairwise differences) against the CPU with the fallback off, in both eager
modes: p = 0, 1, 2, 3, 0.5 and inf, batched, with a zero distance (the gradient's special case),
gradients for both inputs; and torch's matmul path for larger euclidean sets, also native."""
import pytest
import torch


def pair(seed, p_rows=6, r_rows=7):
    g = torch.Generator().manual_seed(seed)
    a, b = torch.randn(2, p_rows, 5, generator=g), torch.randn(2, r_rows, 5, generator=g)
    b[0, 0] = a[0, 0]  # one distance of zero
    return a, b


@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 3.0, 0.5, float("inf")])
def test_distances_and_gradients_match_the_cpu(native_in_each_eager_mode, p):
    a, b = pair(0)
    xa, xb = a.clone().requires_grad_(), b.clone().requires_grad_()
    ta, tb = a.to("tpu").requires_grad_(), b.to("tpu").requires_grad_()
    want, got = torch.cdist(xa, xb, p), torch.cdist(ta, tb, p)
    torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)
    weights = torch.rand(want.shape, generator=torch.Generator().manual_seed(1))
    (want * weights).sum().backward()
    (got * weights.to("tpu")).sum().backward()
    torch.testing.assert_close(ta.grad.cpu(), xa.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(tb.grad.cpu(), xb.grad, rtol=1e-4, atol=1e-5)


def test_large_euclidean_sets_take_torch_s_matmul_path(native_in_each_eager_mode):
    g = torch.Generator().manual_seed(2)
    a, b = torch.randn(2, 40, 5, generator=g), torch.randn(2, 30, 5, generator=g)  # more than 25 rows: torch
    # computes sqrt(|a|^2 + |b|^2 - 2ab), whose cancellation near zero distances differs in the last bits
    torch.testing.assert_close(torch.cdist(a.to("tpu"), b.to("tpu")).cpu(), torch.cdist(a, b), rtol=1e-4, atol=1e-4)


def test_errors_match_the_cpus(native_in_each_eager_mode):
    with pytest.raises(RuntimeError, match="same number of columns"):
        torch.cdist(torch.zeros(3, 4).to("tpu"), torch.zeros(3, 5).to("tpu"))
    with pytest.raises(RuntimeError, match="non-negative p"):
        torch.cdist(torch.zeros(3, 4).to("tpu"), torch.zeros(3, 4).to("tpu"), p=-1.0)
