"""2-D pooling on the chip (kernels/compose/pooling.h): average, max (values and int64 indices) and
adaptive average pooling, forward and backward, against the CPU with the fallback off, in both
modes; what stays off the chip says why."""
import pytest
import torch
import torch.nn.functional as F

import vtpu

CASES = {
    "avg_2x2": lambda x: F.avg_pool2d(x, 2),
    "avg_pad_ceil_exclude_pad": lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
    "avg_divisor_override": lambda x: F.avg_pool2d(x, (3, 2), (1, 2), 1, divisor_override=4),
    "max_3x3_s2_p1": lambda x: F.max_pool2d(x, 3, 2, 1),
    "max_ceil_dilation": lambda x: F.max_pool2d(x, (3, 2), (2, 1), (1, 0), dilation=2, ceil_mode=True),
    "adaptive_avg_to_divisor": lambda x: F.adaptive_avg_pool2d(x, (3, 4)),
    "adaptive_avg_global": lambda x: F.adaptive_avg_pool2d(x, 1),
}


@pytest.mark.parametrize("mode", ["strict_eager", "defer_and_fuse"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_pooling_and_gradient_match_cpu(case, mode, no_fallback):
    vtpu.set_mode(mode)
    torch.manual_seed(0)
    # Values on a coarse grid: max pooling windows hold ties, and the first maximum must win.
    x = (torch.randn(2, 3, 9, 12) * 2).round() / 2
    x.requires_grad_(True)
    xt = x.detach().to("tpu").requires_grad_(True)
    y, yt = CASES[case](x), CASES[case](xt)
    grad = torch.randn_like(y)
    y.backward(grad)
    yt.backward(grad.to("tpu"))
    torch.testing.assert_close(yt.cpu(), y, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(xt.grad.cpu(), x.grad, atol=1e-5, rtol=1e-5)
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def test_max_pool_indices_are_int64_and_match(no_fallback):
    x = (torch.randn(3, 10, 10) * 2).round()  # [C, H, W]: one image
    values, indices = F.max_pool2d(x.to("tpu"), 3, 2, 1, return_indices=True)
    want_values, want_indices = F.max_pool2d(x, 3, 2, 1, return_indices=True)
    assert indices.dtype == torch.int64 and indices.shape == want_indices.shape
    assert torch.equal(indices.cpu(), want_indices)
    assert torch.equal(values.cpu(), want_values)
    # max_unpool2d reads the indices the way torch lays them out
    torch.testing.assert_close(F.max_unpool2d(values.cpu(), indices.cpu(), 3, 2, 1, output_size=(10, 10)),
                               F.max_unpool2d(want_values, want_indices, 3, 2, 1, output_size=(10, 10)))


def test_bf16_pooling(no_fallback):
    x = torch.randn(2, 4, 8, 8).bfloat16()
    assert torch.equal(F.max_pool2d(x.to("tpu"), 2).cpu(), F.max_pool2d(x, 2))
    torch.testing.assert_close(F.avg_pool2d(x.to("tpu"), 2).cpu().float(), F.avg_pool2d(x.float(), 2), atol=1e-2, rtol=1e-2)


def test_small_cnn_with_pooling_trains_like_cpu(no_fallback, sgd_losses):
    def make():
        torch.manual_seed(2)
        return torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                                   torch.nn.Conv2d(4, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
                                   torch.nn.Flatten(), torch.nn.Linear(8, 3))

    x, labels = torch.randn(8, 1, 12, 12), torch.randint(0, 3, (8,))
    losses = {}
    for device in ["cpu", "tpu"]:
        xd = x.to(device)
        # cross entropy from log_softmax + a one-hot product (nll_loss's int64 gather is not lowered)
        one_hot = F.one_hot(labels, 3).float().to(device)
        losses[device] = sgd_losses(make().to(device), lambda m: -(F.log_softmax(m(xd), -1) * one_hot).sum(-1).mean(), lr=0.2)
    assert losses["tpu"][-1] < losses["tpu"][0]
    torch.testing.assert_close(torch.tensor(losses["tpu"]), torch.tensor(losses["cpu"]), atol=1e-4, rtol=1e-4)
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def test_pooling_off_the_chip_says_why(no_fallback):
    with pytest.raises(NotImplementedError, match="integer pooling"):
        F.avg_pool2d(torch.ones(1, 2, 4, 4, dtype=torch.int32, device="tpu"), 2)


@pytest.mark.parametrize("shape,out", [((2, 3, 7, 5), (3, 4)), ((1, 2, 10, 10), (7, 7)), ((3, 6, 9), (4,))])
def test_adaptive_average_pooling_to_any_size_forward_and_backward(shape, out):
    vtpu.set_cpu_fallback(False)  # varying windows (7 -> 3 ran on the CPU) as products with averaging matrices
    x = torch.randn(*shape)
    pool = torch.nn.functional.adaptive_avg_pool2d if len(out) == 2 else torch.nn.functional.adaptive_avg_pool1d
    grads = {}
    for device in ("cpu", "tpu"):
        a = x.detach().to(device).requires_grad_()
        y = pool(a, out)
        (y * torch.linspace(-1, 1, y.numel()).view(y.shape).to(device)).sum().backward()
        grads[device] = (y.detach().cpu(), a.grad.cpu())
    torch.testing.assert_close(grads["tpu"], grads["cpu"], atol=1e-6, rtol=1e-5)
