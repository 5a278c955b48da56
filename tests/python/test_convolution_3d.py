"""conv3d and conv_transpose3d on the chip as their 2-D forms over the kernel's depth taps
(vtpu/convolution_3d.py): stride, padding (numbers, 'same', 'valid'), output_padding, dilation,
groups, bias, unbatched input; output and the input, weight and bias gradients against the CPU
with the fallback off."""
import copy

import pytest
import torch
import torch.nn.functional as F

pytestmark = pytest.mark.usefixtures("native_in_each_eager_mode")

CONFIGS = [
    dict(kernel_size=(3, 2, 3)),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=(3, 2, 3), padding=(1, 0, 2), dilation=(2, 1, 1)),
    dict(kernel_size=(2, 3, 3), groups=2, bias=False),
    dict(kernel_size=(3, 2, 3), padding="same", dilation=2),
    dict(kernel_size=(4, 2, 3), padding="same"),  # even kernel: torch pads the far side once more
    dict(kernel_size=(3, 3, 1), padding="valid", stride=(2, 1, 1)),
]


TRANSPOSED = [
    dict(kernel_size=(3, 2, 3)),
    dict(kernel_size=3, stride=2, padding=1, output_padding=1),
    dict(kernel_size=(2, 3, 2), stride=(3, 1, 2), padding=(1, 0, 1), dilation=(2, 1, 1), output_padding=(1, 0, 1)),
    dict(kernel_size=2, groups=2, bias=False),
]


def _compare(model, x):
    results = {}
    for device in ("cpu", "tpu"):
        m = copy.deepcopy(model).to(device)
        inp = x.to(device).detach().requires_grad_()
        out = m(inp)
        (out * torch.linspace(-1, 1, out.numel()).reshape(out.shape).to(device)).sum().backward()
        results[device] = [out.detach().cpu(), inp.grad.cpu()] + [p.grad.cpu() for p in m.parameters()]
    torch.testing.assert_close(results["tpu"], results["cpu"], atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("config", CONFIGS, ids=[str(c) for c in CONFIGS])
def test_conv3d_and_its_gradients_match_the_cpu(config):
    torch.manual_seed(0)
    _compare(torch.nn.Conv3d(4, 6, **config), torch.randn(2, 4, 7, 6, 8))


@pytest.mark.parametrize("config", TRANSPOSED, ids=[str(c) for c in TRANSPOSED])
def test_conv_transpose3d_and_its_gradients_match_the_cpu(config):
    torch.manual_seed(1)
    _compare(torch.nn.ConvTranspose3d(4, 6, **config), torch.randn(2, 4, 4, 5, 3))


def test_unbatched_input():
    x, w = torch.randn(3, 5, 5, 5), torch.randn(3, 3, 2, 2, 2)
    for conv in (F.conv3d, F.conv_transpose3d):
        torch.testing.assert_close(conv(x.to("tpu"), w.to("tpu"), padding=1).cpu(), conv(x, w, padding=1),
                                   atol=1e-4, rtol=1e-4)


def test_transposed_output_padding_beyond_the_stride():
    # torch allows output_padding below max(stride, dilation); the 2-D kernel only below the stride
    x, w = torch.randn(2, 2, 4, 4, 4), torch.randn(2, 2, 4, 5, 6)
    config = dict(stride=(3, 2, 1), padding=(1, 2, 3), output_padding=(2, 3, 1), groups=2, dilation=(4, 4, 4))
    torch.testing.assert_close(F.conv_transpose3d(x.to("tpu"), w.to("tpu"), **config).cpu(),
                               F.conv_transpose3d(x, w, **config), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("conv", [F.conv3d, F.conv_transpose3d], ids=["conv3d", "conv_transpose3d"])
def test_bf16_sums_the_taps_in_f32_and_rounds_once(conv):
    x, w = torch.randn(2, 3, 5, 4, 4).bfloat16(), torch.randn(3, 3, 3, 2, 3).bfloat16()
    got = conv(x.to("tpu"), w.to("tpu"), padding=1)
    assert got.dtype == torch.bfloat16
    assert torch.equal(got.cpu(), conv(x.float(), w.float(), padding=1).bfloat16())
