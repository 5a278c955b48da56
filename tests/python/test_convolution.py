"""Convolutions on the chip (kernels/compose/convolution.h through aten::convolution_overrideable and its
backward): forward, input, weight and bias gradients against the CPU with the fallback off, in
both modes, for the shapes models use (padding, strides, dilation, groups, depthwise, patch
embeddings, conv1d, transposed convolutions), and a clear error for what stays off the chip."""
import pytest
import torch
import torch.nn.functional as F

import vtpu

# (module factory, input shape). Default matmul precision ('highest'): f32-accurate MXU passes.
CASES = {
    "3x3_pad1": (lambda: torch.nn.Conv2d(3, 8, 3, padding=1), (2, 3, 12, 12)),
    "stride2_no_bias": (lambda: torch.nn.Conv2d(4, 6, (3, 2), stride=2, padding=(1, 0), bias=False), (1, 4, 17, 13)),
    "dilation2": (lambda: torch.nn.Conv2d(2, 3, 3, dilation=2, padding=2), (2, 2, 11, 12)),
    "groups2": (lambda: torch.nn.Conv2d(4, 6, 3, padding=1, groups=2), (2, 4, 8, 8)),
    "groups17_regnet": (lambda: torch.nn.Conv2d(34, 51, 3, stride=2, padding=1, groups=17), (2, 34, 9, 9)),
    "groups32_resnext": (lambda: torch.nn.Conv2d(64, 64, 3, padding=1, groups=32, bias=False), (1, 64, 6, 6)),
    "conv_transpose_grouped": (lambda: torch.nn.ConvTranspose2d(36, 18, 3, stride=2, padding=1, groups=18), (1, 36, 5, 5)),
    "conv_transpose_depthwise": (lambda: torch.nn.ConvTranspose2d(6, 6, 3, stride=2, padding=1, groups=6), (2, 6, 5, 4)),
    # 8 or more output channels per group: channels last (kernels/compose/windows.h, col2im_channels_last)
    "conv_transpose_channels_last": (lambda: torch.nn.ConvTranspose2d(6, 16, 3, stride=2, padding=1, output_padding=1), (2, 6, 5, 7)),
    "conv_transpose_channels_last_grouped": (
        lambda: torch.nn.ConvTranspose2d(8, 32, (4, 3), stride=(2, 3), padding=(1, 0), groups=2, dilation=(1, 2)), (2, 8, 4, 5)),
    "depthwise_7x7": (lambda: torch.nn.Conv2d(24, 24, 7, padding=3, groups=24), (2, 24, 9, 9)),
    "patch_embedding": (lambda: torch.nn.Conv2d(3, 16, 8, stride=8), (2, 3, 32, 32)),
    "padding_same": (lambda: torch.nn.Conv2d(3, 4, 4, padding="same"), (1, 3, 10, 10)),
    "conv1d": (lambda: torch.nn.Conv1d(4, 5, 5, stride=2, padding=2), (2, 4, 50)),
    "conv1d_depthwise": (lambda: torch.nn.Conv1d(8, 8, 3, padding=1, groups=8), (2, 8, 30)),
    "conv_transpose2d": (lambda: torch.nn.ConvTranspose2d(4, 3, 3, stride=2, padding=1, output_padding=1), (2, 4, 7, 7)),
    "conv_transpose1d": (lambda: torch.nn.ConvTranspose1d(4, 2, 4, stride=2, padding=1), (2, 4, 20)),
    # torch allows output padding below max(stride, dilation): past the stride here (it was refused)
    "conv_transpose_output_padding_past_stride": (
        lambda: torch.nn.ConvTranspose2d(2, 4, (4, 5), stride=(3, 2), padding=(1, 2), output_padding=(2, 3), groups=2,
                                         dilation=4), (2, 2, 4, 4)),
}


@pytest.mark.parametrize("mode", ["strict_eager", "defer_and_fuse"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_forward_and_gradients_match_cpu(case, mode, no_fallback):
    vtpu.set_mode(mode)
    make, shape = CASES[case]
    torch.manual_seed(0)
    cpu = make()
    tpu = make().to("tpu")
    tpu.load_state_dict(cpu.state_dict())
    x = torch.randn(shape, requires_grad=True)
    xt = x.detach().to("tpu").requires_grad_(True)
    y, yt = cpu(x), tpu(xt)
    grad = torch.randn_like(y)
    y.backward(grad)
    yt.backward(grad.to("tpu"))
    torch.testing.assert_close(yt.cpu(), y, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(xt.grad.cpu(), x.grad, atol=1e-4, rtol=1e-4)
    for name, p in cpu.named_parameters():
        torch.testing.assert_close(dict(tpu.named_parameters())[name].grad.cpu(), p.grad, atol=1e-4, rtol=1e-4, msg=name)
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def test_bf16_convolution(no_fallback):
    torch.manual_seed(0)
    x, w = torch.randn(2, 8, 10, 10).bfloat16(), torch.randn(16, 8, 3, 3).bfloat16()
    got = torch.nn.functional.conv2d(x.to("tpu"), w.to("tpu"), padding=1).cpu()
    assert got.dtype == torch.bfloat16
    want = torch.nn.functional.conv2d(x.float(), w.float(), padding=1)
    # bf16 inputs, f32 accumulation on the MXU, one bf16 rounding of the result (2^-8 relative).
    torch.testing.assert_close(got.float(), want, atol=2e-2, rtol=1e-2)


@pytest.mark.parametrize("channels", [6, 16])
@pytest.mark.parametrize("conv", [F.conv2d, F.conv_transpose2d], ids=["conv2d", "conv_transpose2d"])
def test_bf16_with_a_bias_rounds_once(conv, channels, no_fallback):
    """The bias joins the f32 sums before the bf16 result is rounded, once: exactly the f32
    convolution of the same values, rounded. Before, the sums were rounded, the bias added, and
    the result rounded again: outputs off by a bf16 ulp where the two roundings differ."""
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(2, 4, 9, 9, generator=g) * 3).bfloat16()
    w = (torch.randn(channels, 4, 3, 3, generator=g) * 3).bfloat16()
    b = (torch.randn(channels, generator=g) * 8).bfloat16()  # output channels either way
    w = w if conv is F.conv2d else w.transpose(0, 1).contiguous()
    got = conv(x.to("tpu"), w.to("tpu"), b.to("tpu"), stride=2).cpu()
    assert got.dtype == torch.bfloat16
    assert torch.equal(got, conv(x.float(), w.float(), b.float(), stride=2).bfloat16())
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def test_small_cnn_trains_like_cpu(no_fallback, sgd_losses):
    def make():
        torch.manual_seed(1)
        return torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(4, 4, 3, stride=2),
                                   torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(4 * 3 * 3, 2))

    x, target = torch.randn(8, 1, 8, 8), torch.randn(8, 2)
    losses = {}
    for device in ["cpu", "tpu"]:
        xd, td = x.to(device), target.to(device)
        losses[device] = sgd_losses(make().to(device), lambda m: ((m(xd) - td) ** 2).mean(), lr=0.1)
    assert losses["tpu"][-1] < losses["tpu"][0]
    torch.testing.assert_close(torch.tensor(losses["tpu"]), torch.tensor(losses["cpu"]), atol=1e-4, rtol=1e-4)
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def test_unsupported_convolutions_name_the_op_and_the_reason(no_fallback):
    x, w = torch.randn(1, 2, 4, 4, 4, device="tpu"), torch.randn(3, 2, 2, 2, 2, device="tpu")
    with pytest.raises(NotImplementedError, match=r"convolution_overrideable.*spatial dims"):
        torch.convolution(x, w, None, [1] * 3, [0] * 3, [1] * 3, False, [0] * 3, 1)  # (F.conv3d is composed of conv2d's)


# Gradients whose matmul K outgrows v5e's VMEM (the zoo's sam_hq, textnet and univnet failed the
# flush): split into K slices summed in f32 (kernels/compose/long_k_matmul.h).
LONG_K = {
    # weight gradient: K = images x positions = 65536
    "weight_grad_k65536": (lambda: torch.nn.Conv2d(16, 32, 3, padding=1), (1, 16, 256, 256)),
    # input gradient: K = output channels x taps = 73728
    "input_grad_k73728": (lambda: torch.nn.Conv1d(4, 24576, 3, padding=1), (1, 4, 100)),
}


@pytest.mark.parametrize("case", sorted(LONG_K))
def test_gradients_whose_k_outgrows_vmem(case, no_fallback):
    make, shape = LONG_K[case]
    torch.manual_seed(0)
    module, x = make(), torch.randn(shape)
    chip = {k: v.to("tpu") for k, v in module.state_dict().items()}
    on_chip = make().to("tpu")
    on_chip.load_state_dict(chip)
    grad_y = torch.randn(module(x).shape)
    module(x.requires_grad_()).backward(grad_y)
    xt = x.detach().to("tpu").requires_grad_()
    on_chip(xt).backward(grad_y.to("tpu"))
    for got, want in ((xt.grad, x.grad), (on_chip.weight.grad, module.weight.grad), (on_chip.bias.grad, module.bias.grad)):
        torch.testing.assert_close(got.cpu(), want, atol=2e-5 * want.abs().max().item(), rtol=0)
