"""interpolate(..., antialias=True) on the chip, bilinear and bicubic (vtpu/upsample_antialias.py):
values and gradients against the CPU's kernel over down- and upsampling, align_corners, scale
factors and single-dim resizes; infinities and NaN where the CPU's windows put them; uint8,
whose CPU path sums fixed-point weights, runs there, named."""
import itertools

import pytest
import torch
import torch.nn.functional as F

import vtpu

MODES = ["bilinear", "bicubic"]
SIZES = [((17, 23), (8, 11)), ((9, 12), (31, 20)), ((30, 40), (30, 13)), ((6, 5), (6, 5)), ((64, 48), (7, 9))]


def _on_both(f, x):
    return f(x), f(x.to("tpu")).cpu()


@pytest.mark.usefixtures("native_in_each_eager_mode")
@pytest.mark.parametrize("mode, align_corners", list(itertools.product(MODES, [False, True])))
def test_antialiased_resizing_matches_the_cpus_kernel(mode, align_corners):
    torch.manual_seed(0)
    for (h, w), size in SIZES:
        want, got = _on_both(lambda t: F.interpolate(t, size=size, mode=mode, antialias=True, align_corners=align_corners),
                             torch.randn(2, 3, h, w))
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5, msg=f"{(h, w)} -> {size}")


@pytest.mark.usefixtures("native_in_each_eager_mode")
@pytest.mark.parametrize("mode", MODES)
def test_scale_factors_set_the_filters_width_as_the_cpus(mode):
    # A given scale factor is the ratio the CPU uses (1 / scale), not in / out.
    x = torch.randn(1, 2, 30, 40)
    for scale in (0.3, 0.77, 1.9):
        want, got = _on_both(lambda t: F.interpolate(t, scale_factor=scale, mode=mode, antialias=True), x)
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5, msg=f"scale {scale}")


@pytest.mark.usefixtures("native_in_each_eager_mode")
@pytest.mark.parametrize("mode", MODES)
def test_infinities_and_nan_stay_inside_the_windows_the_cpu_reads(mode):
    # Shorter windows read an appended 0 (weight 0): read at a clamped index instead, an infinity
    # there would make inf * 0 = NaN in outputs whose window does not hold it.
    x = torch.randn(1, 2, 20, 21)
    x[0, 0, 0, 0], x[0, 0, 10, 10], x[0, 1, 19, 20], x[0, 1, 3, 17] = float("nan"), float("inf"), float("-inf"), float("inf")
    for size in ((7, 9), (33, 40)):
        want, got = _on_both(lambda t: F.interpolate(t, size=size, mode=mode, antialias=True), x)
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5, equal_nan=True)


@pytest.mark.usefixtures("native_in_each_eager_mode")
@pytest.mark.parametrize("mode", MODES)
def test_antialiased_resizing_gradient_matches_the_cpus(mode):
    x = torch.randn(2, 3, 19, 16)
    results = {}
    for device in ("cpu", "tpu"):
        xd = x.to(device).requires_grad_()
        y = F.interpolate(xd, size=(6, 23), mode=mode, antialias=True)
        (grad,) = torch.autograd.grad((y * torch.linspace(-1, 1, y.numel()).view(y.shape).to(device)).sum(), xd)
        results[device] = (y.detach().cpu(), grad.cpu())
    torch.testing.assert_close(results["tpu"], results["cpu"], atol=1e-5, rtol=1e-5)


def test_uint8_images_resize_on_the_cpu_named(cpu_fallback):
    x = torch.randint(0, 256, (1, 3, 20, 30), dtype=torch.uint8)
    vtpu.reset_stats()
    want, got = _on_both(lambda t: F.interpolate(t, size=(7, 11), mode="bilinear", antialias=True), x)
    torch.testing.assert_close(got, want, atol=0, rtol=0)
    assert vtpu.stats()["cpu_fallbacks"] == {"aten::_upsample_bilinear2d_aa": 1}


def test_uint8_without_the_fallback_raises_naming_why(no_fallback):
    x = torch.randint(0, 256, (1, 3, 20, 30), dtype=torch.uint8, device="tpu")
    with pytest.raises(NotImplementedError, match="_upsample_bicubic2d_aa cannot run on the chip: uint8 inputs"):
        F.interpolate(x, size=(7, 11), mode="bicubic", antialias=True)


@pytest.mark.usefixtures("native_in_each_eager_mode")
@pytest.mark.parametrize("mode", MODES)
def test_an_output_one_column_wide_resizes_every_row(mode):
    # The CPU's kernel (torch 2.13) repeats its first output row down the height when the output is
    # one column wide (its vertical pass over the [N, C, H, 1] intermediate reads row 0 each time);
    # that artifact is not copied. Its own result on the transposed input is the reference.
    x = torch.randn(1, 2, 12, 9)
    cpu_as_is = F.interpolate(x, size=(4, 1), mode=mode, antialias=True)
    reference = F.interpolate(x.transpose(-1, -2), size=(1, 4), mode=mode, antialias=True).transpose(-1, -2)
    got = F.interpolate(x.to("tpu"), size=(4, 1), mode=mode, antialias=True).cpu()
    torch.testing.assert_close(got, reference, atol=1e-5, rtol=1e-5)
    assert (cpu_as_is == cpu_as_is[:, :, :1]).all() and not (reference == reference[:, :, :1]).all()
