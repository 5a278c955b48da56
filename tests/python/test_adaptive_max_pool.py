"""adaptive_max_pool2d and 1d for any output size on the chip (torch_bridge/csrc/aten/
adaptive_max_pool.cc: windows read through a table of input positions, a max over each) against
the CPU with the fallback off, in both eager modes: values, indices and gradients exactly,
overlapping and unequal windows, 3-d and 4-d inputs, ties and NaN as torch scans them."""
import pytest
import torch
import torch.nn.functional as F


@pytest.mark.parametrize("shape,out", [((2, 3, 8, 8), 3), ((1, 2, 7, 10), (4, 3)), ((3, 9, 5), (2, 4)),
                                       ((2, 3, 8, 8), (8, 8)), ((2, 3, 8, 8), 1), ((1, 1, 5, 5), (7, 6))])
def test_values_indices_and_gradients_match_the_cpu(native_in_each_eager_mode, shape, out):
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(0))
    want, want_i = F.adaptive_max_pool2d(x, out, return_indices=True)
    got, got_i = F.adaptive_max_pool2d(x.to("tpu"), out, return_indices=True)
    assert torch.equal(got.cpu(), want) and torch.equal(got_i.cpu(), want_i)
    a, b = x.clone().requires_grad_(), x.to("tpu").requires_grad_()
    (F.adaptive_max_pool2d(a, out) * torch.arange(1.0, 1 + want.numel()).reshape(want.shape)).sum().backward()
    (F.adaptive_max_pool2d(b, out) * torch.arange(1.0, 1 + want.numel()).reshape(want.shape).to("tpu")).sum().backward()
    assert torch.equal(b.grad.cpu(), a.grad)


def test_ties_nan_and_1d(native_in_each_eager_mode):
    x = torch.zeros(1, 2, 6, 6)  # every window a tie: the first position in scan order wins
    x[0, 1, 2, 3] = float("nan")
    want, want_i = F.adaptive_max_pool2d(x, 4, return_indices=True)
    got, got_i = F.adaptive_max_pool2d(x.to("tpu"), 4, return_indices=True)
    assert torch.equal(got_i.cpu(), want_i)
    torch.testing.assert_close(got.cpu(), want, equal_nan=True)
    y = torch.randn(2, 5, 12, generator=torch.Generator().manual_seed(1))
    assert torch.equal(F.adaptive_max_pool1d(y.to("tpu"), 5).cpu(), F.adaptive_max_pool1d(y, 5))
