"""FFTs as DFT matmuls on the MXU (vtpu/fft.py): torch.fft's transforms over complex and real
inputs, every normalisation, odd and even lengths, one-sided outputs and their inverses, and
FNet's token mixing with its gradient, against the CPU's FFT (relative to the output's largest
magnitude), in both eager modes with no CPU op."""
import pytest
import torch

pytestmark = pytest.mark.usefixtures("native_in_each_eager_mode")


def close(fn, x, rtol=2e-6):
    got, want = fn(x.to("tpu")), fn(x)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert (got.cpu() - want).abs().max() <= rtol * want.abs().max()


Z = torch.complex(torch.randn(3, 6, 10, generator=torch.Generator().manual_seed(0)),
                  torch.randn(3, 6, 10, generator=torch.Generator().manual_seed(1)))
R = torch.randn(3, 6, 9, generator=torch.Generator().manual_seed(2))

TRANSFORMS = {
    "fft": (torch.fft.fft, Z), "ifft": (torch.fft.ifft, Z), "fft2": (torch.fft.fft2, Z), "ifftn": (torch.fft.ifftn, Z),
    "fft of a real input": (torch.fft.fft, R), "rfft odd": (torch.fft.rfft, R), "rfft2": (torch.fft.rfft2, R),
    "irfft": (torch.fft.irfft, Z), "irfft odd n": (lambda t, **k: torch.fft.irfft(t, n=9, **k), Z),
    "irfft longer n": (lambda t, **k: torch.fft.irfft(t, n=30, **k), Z), "irfftn": (torch.fft.irfftn, Z),
    "hfft": (torch.fft.hfft, Z), "ihfft": (torch.fft.ihfft, R), "conjugate input": (lambda t, **k: torch.fft.fft(t.conj(), **k), Z),
}


@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
@pytest.mark.parametrize("name", TRANSFORMS)
def test_transforms_match_the_cpu(name, norm):
    fn, x = TRANSFORMS[name]
    close(lambda t: fn(t, norm=norm) if norm else fn(t), x)


def test_long_transforms_stay_f32_accurate():
    close(torch.fft.fft, torch.randn(2, 512, dtype=torch.complex64), rtol=5e-6)
    close(torch.fft.rfft, torch.randn(2, 1000), rtol=5e-6)


def test_fnet_token_mixing_and_its_gradient():
    x = torch.randn(2, 8, 16, requires_grad=True)
    y = x.detach().to("tpu").requires_grad_()
    outs = [torch.fft.fftn(t, dim=(1, 2)).real for t in (x, y)]
    assert (outs[1].detach().cpu() - outs[0].detach()).abs().max() <= 2e-6 * outs[0].abs().max()
    for out in outs:
        out.square().sum().backward()
    assert (y.grad.cpu() - x.grad).abs().max() <= 2e-6 * x.grad.abs().max()
