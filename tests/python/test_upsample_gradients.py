"""Upsampling's gradients on the chip (vtpu/autograd_decompositions.py): every F.interpolate mode
in 1-D, 2-D and 3-D, with and without align_corners, output and input gradient against the CPU
with the fallback off."""
import pytest
import torch
import torch.nn.functional as F

pytestmark = pytest.mark.usefixtures("native_in_each_eager_mode")

CASES = [
    ((2, 3, 7), dict(scale_factor=2, mode="nearest")),
    ((2, 3, 7), dict(size=11, mode="linear")),
    ((2, 3, 7), dict(size=11, mode="linear", align_corners=True)),
    ((2, 3, 5, 6), dict(scale_factor=2, mode="nearest")),
    ((2, 3, 5, 6), dict(size=(7, 9), mode="nearest-exact")),
    ((2, 3, 5, 6), dict(scale_factor=1.7, mode="bilinear")),
    ((2, 3, 5, 6), dict(size=(8, 8), mode="bicubic", align_corners=True)),
    ((1, 2, 3, 4, 5), dict(scale_factor=2, mode="trilinear")),
    ((1, 2, 3, 4, 5), dict(size=(4, 7, 3), mode="nearest")),
]


@pytest.mark.parametrize("shape, config", CASES, ids=[f"{len(s) - 2}d-{c}" for s, c in CASES])
def test_output_and_input_gradient_match_the_cpu(shape, config):
    x = torch.randn(shape, generator=torch.Generator().manual_seed(0))
    results = {}
    for device in ("cpu", "tpu"):
        inp = x.to(device).detach().requires_grad_()
        out = F.interpolate(inp, **config)
        (out * torch.linspace(-1, 1, out.numel()).reshape(out.shape).to(device)).sum().backward()
        results[device] = (out.detach().cpu(), inp.grad.cpu())
    torch.testing.assert_close(results["tpu"], results["cpu"], atol=1e-5, rtol=1e-4)
