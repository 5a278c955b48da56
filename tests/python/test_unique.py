"""torch.unique and unique_consecutive on the chip (vtpu/unique.py) against the CPU: values,
inverse indices and counts, for floats with repeats, NaN (each its own value), signed zeros, bool
and small integers, 0-d and empty inputs, any shape (flattened); with the fallback off, in both
eager modes. unique along a dim falls back, named."""
import math

import pytest
import torch

pytestmark = pytest.mark.usefixtures("native_in_each_eager_mode")

INPUTS = {
    "floats": torch.tensor([[3.0, 1, 2, 3], [1.5, 1, -4, 3]]),
    "NaN and signed zeros": torch.tensor([3.0, math.nan, 1, -0.0, math.nan, 0.0, 1, math.inf, -math.inf]),
    "random repeats": torch.randint(-5, 5, (4, 5, 6), generator=torch.Generator().manual_seed(0)).float(),
    "bool": torch.tensor([True, False, False, True, True]),
    "int64": torch.tensor([7, -2, 7, 7, 0, -2, 100]),
    "int32": torch.tensor([[1, 1], [2, 1]], dtype=torch.int32),
    "0-d": torch.tensor(2.5),
    "empty": torch.empty(0, 3),
}


def same(got, want):
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        torch.testing.assert_close(g.cpu(), w, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("name", INPUTS)
def test_unique_matches_the_cpu(name):
    x = INPUTS[name]
    for kwargs in (dict(), dict(return_inverse=True), dict(return_counts=True), dict(return_inverse=True, return_counts=True)):
        got, want = torch.unique(x.to("tpu"), **kwargs), torch.unique(x, **kwargs)
        same(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,))
    same(torch._unique(x.to("tpu"), return_inverse=True), torch._unique(x, return_inverse=True))


@pytest.mark.parametrize("name", INPUTS)
def test_unique_consecutive_matches_the_cpu(name):
    x = INPUTS[name]
    got = torch.unique_consecutive(x.to("tpu"), return_inverse=True, return_counts=True)
    same(got, torch.unique_consecutive(x, return_inverse=True, return_counts=True))
    same((torch.unique_consecutive(x.to("tpu")),), (torch.unique_consecutive(x),))


def test_index_fill_gradient_runs_on_the_chip():
    """index_fill's backward asks unique for the filled positions."""
    x = torch.randn(4, 5, generator=torch.Generator().manual_seed(1))
    index = torch.tensor([3, 0, 3])
    results = []
    for device in ("tpu", "cpu"):
        t = x.to(device).requires_grad_()
        t.index_fill(1, index.to(device), 2.0).pow(2).sum().backward()
        results.append(t.grad.cpu())
    torch.testing.assert_close(*results)


def test_along_a_dim_falls_back_named(no_fallback):
    with pytest.raises(NotImplementedError, match="unique_consecutive cannot run on the chip: along a dim"):
        torch.unique_consecutive(torch.ones(2, 3, device="tpu"), dim=0)
