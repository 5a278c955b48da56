"""Gradients of ops decomposed above autograd on the chip (vtpu/autograd_decompositions.py): every
F.interpolate mode in 1-D, 2-D and 3-D, with and without align_corners; grid_sample's modes on
images and volumes (the grid's gradient too, zero for nearest as torch gives it); take; renorm (whose
own backward takes its norms in float64). Outputs and gradients against the CPU with the fallback
off; weight norm's gradients; sgn's zero gradient."""
import copy

import pytest
import torch
import torch.nn.functional as F
from cpu_comparison import assert_matches_cpu

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
    assert_matches_cpu(lambda t: F.interpolate(t, **config), x, atol=1e-5, rtol=1e-4)


GRID_CASES = [dict(align_corners=False), dict(mode="nearest", align_corners=False),
              dict(align_corners=True, padding_mode="border"), dict(mode="bicubic", align_corners=False)]


@pytest.mark.parametrize("config", GRID_CASES, ids=[str(c) for c in GRID_CASES])
def test_grid_sample_and_its_gradients_match_the_cpu(config):
    g = torch.Generator().manual_seed(1)
    x, grid = torch.randn(2, 3, 5, 6, generator=g), torch.rand(2, 4, 7, 2, generator=g) * 2.2 - 1.1
    assert_matches_cpu(lambda t, where: F.grid_sample(t, where, **config), x, grid, atol=1e-4, rtol=1e-4)


VOLUME_CASES = [dict(align_corners=False), dict(mode="nearest", align_corners=True),
                dict(align_corners=True, padding_mode="border"), dict(padding_mode="reflection", align_corners=False)]


@pytest.mark.parametrize("config", VOLUME_CASES, ids=[str(c) for c in VOLUME_CASES])
def test_grid_sample_of_volumes_and_its_gradients_match_the_cpu(config):
    # grid_sampler_3d has no torch decomposition: it ran on the CPU fallback (vtpu/grid_sample.py)
    g = torch.Generator().manual_seed(3)
    x, grid = torch.randn(2, 3, 4, 5, 6, generator=g), torch.rand(2, 3, 4, 5, 3, generator=g) * 2.2 - 1.1
    assert_matches_cpu(lambda t, where: F.grid_sample(t, where, **config), x, grid, atol=1e-4, rtol=1e-4)


def test_take_and_its_gradient_match_the_cpu():
    x, index = torch.randn(6, 10, generator=torch.Generator().manual_seed(2)), torch.tensor([[0, 5], [59, 5]])
    assert_matches_cpu(torch.take, x, index)


@pytest.mark.parametrize("dim", [0, 2])
def test_weight_norm_trains_on_the_chip(dim):
    # nn.utils.weight_norm (wav2vec2's positional convolution): _weight_norm_interface runs as its
    # decomposition above autograd, so its backward is the decomposed ops' own
    torch.manual_seed(0)
    conv = torch.nn.utils.parametrizations.weight_norm(torch.nn.Conv1d(4, 6, 3), dim=dim)
    x = torch.randn(2, 4, 9)
    on_chip = copy.deepcopy(conv).to("tpu")
    conv(x).square().mean().backward()
    on_chip(x.to("tpu")).square().mean().backward()
    for p, q in zip(conv.parameters(), on_chip.parameters()):
        torch.testing.assert_close(q.grad.cpu(), p.grad, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("p, maxnorm", [(2.0, 1.0), (1.0, 0.5), (float("inf"), 2.0)])
def test_renorm_and_its_gradient_match_the_cpu(p, maxnorm):
    # torch's renorm_backward takes norms in float64 (the CPU's accumulation type, which torch gives
    # a device it does not know); the decomposition above autograd keeps them in f32
    x = torch.randn(4, 3, 5, generator=torch.Generator().manual_seed(4)) * 2
    assert_matches_cpu(lambda t: torch.renorm(t, p, 1, maxnorm), x, atol=1e-5, rtol=1e-4)


def test_sgn_of_a_real_tensor_has_a_zero_gradient_on_the_chip():
    # the backward formula returns _efficientzerotensor, a zero-filled tensor on the chip
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(5))
    assert_matches_cpu(lambda t: torch.sgn(t) * t, x)
