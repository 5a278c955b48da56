"""avg_pool3d on the chip as two avg_pool2d's, height and width then depth (vtpu/pooling_3d.py):
stride, padding with and without count_include_pad, ceil_mode (windows clipped at the far edge),
divisor_override, unbatched input, and the modules that pool with it (LPPool3d,
LocalResponseNorm), forward and input gradient against the CPU with the fallback off,
max_pool3d's gradient and adaptive 3-D pooling (values, indices, gradients)."""
import pytest
import torch
import torch.nn.functional as F
from cpu_comparison import assert_matches_cpu

CONFIGS = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=(3, 2, 3), stride=(1, 2, 1), padding=(1, 1, 0), count_include_pad=False),
    dict(kernel_size=(2, 3, 3), stride=(2, 2, 3), padding=(1, 1, 0), ceil_mode=True),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
    dict(kernel_size=(3, 2, 2), stride=2, padding=(1, 0, 1), divisor_override=5),
    dict(kernel_size=2, stride=(3, 1, 2), ceil_mode=True, divisor_override=3),
]


@pytest.mark.usefixtures("native_in_each_eager_mode")
@pytest.mark.parametrize("config", CONFIGS, ids=[str(c) for c in CONFIGS])
def test_avg_pool3d_and_its_gradient_match_the_cpu(config):
    x = torch.randn(2, 3, 7, 6, 8, generator=torch.Generator().manual_seed(1))
    assert_matches_cpu(lambda t: F.avg_pool3d(t, **config), x)


@pytest.mark.usefixtures("native_in_each_eager_mode")
@pytest.mark.parametrize("module", [torch.nn.LPPool3d(2, 2), torch.nn.LocalResponseNorm(3), torch.nn.AvgPool3d(2)],
                         ids=["LPPool3d", "LocalResponseNorm", "AvgPool3d"])
def test_modules_that_pool_in_3d(module):
    x = torch.rand(4, 4, 4, 4, generator=torch.Generator().manual_seed(2)) + 0.1  # unbatched for AvgPool3d
    x = x.unsqueeze(0) if not isinstance(module, torch.nn.AvgPool3d) else x
    torch.testing.assert_close(module(x.to("tpu")).cpu(), module(x))


@pytest.mark.usefixtures("native_in_each_eager_mode")
@pytest.mark.parametrize("config", [dict(kernel_size=2), dict(kernel_size=3, stride=(1, 2, 1), padding=1)])
def test_max_pool3d_gradient_goes_to_each_maximum(config):
    x = torch.randn(2, 3, 5, 4, 6, generator=torch.Generator().manual_seed(3))
    assert_matches_cpu(lambda t: F.max_pool3d(t, **config), x)


@pytest.mark.usefixtures("native_in_each_eager_mode")
@pytest.mark.parametrize("size", [(2, 3, 2), (1, 1, 1), (3, 4, 5), (5, 2, 3)])
@pytest.mark.parametrize("kind", ["avg", "max"])
def test_adaptive_pooling_matches_the_cpu(size, kind):
    x = torch.randn(2, 3, 5, 6, 7, generator=torch.Generator().manual_seed(4))
    if kind == "avg":
        assert_matches_cpu(lambda t: F.adaptive_avg_pool3d(t, size), x)
    else:
        assert_matches_cpu(lambda t: F.adaptive_max_pool3d(t, size), x)
        got, want = (F.adaptive_max_pool3d(x.to(d), size, return_indices=True)[1].cpu() for d in ("tpu", "cpu"))
        assert torch.equal(got, want)


@pytest.mark.usefixtures("native_in_each_eager_mode")
@pytest.mark.parametrize("fn", [lambda t: F.adaptive_avg_pool3d(t, (5, 7, 4)), lambda t: F.avg_pool3d(t, 2),
                                lambda t: F.conv3d(t, torch.ones(2, 8, 2, 2, 2, device=t.device)),
                                lambda t: F.conv_transpose3d(t, torch.ones(8, 2, 2, 2, 2, device=t.device))],
                         ids=["adaptive_avg_pool3d", "avg_pool3d", "conv3d", "conv_transpose3d"])
def test_an_empty_batch_gives_an_empty_result_of_the_right_shape(fn):
    x = torch.randn(0, 8, 8, 8, 8)  # the depth folding's batch split cannot be inferred from no elements
    got, want = fn(x.to("tpu")), fn(x)
    assert got.shape == want.shape
