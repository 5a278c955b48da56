"""torch.prod on the chip (a row kernel's product, kernels/generators/rowwise.h) against the CPU with the
fallback off: over each dim and everything, keepdim, bf16, zeros, negative values and NaN, out=,
both modes; integer products (int64 in torch) fall back naming why."""
import pytest
import torch

import vtpu


@pytest.fixture(autouse=True)
def chip(no_fallback):
    yield


@pytest.mark.parametrize("mode", ["strict_eager", "defer_and_fuse"])
@pytest.mark.parametrize("dim,keepdim", [(None, False), (0, False), (1, True), (-1, False)])
def test_prod_matches_the_cpu(mode, dim, keepdim):
    """Products of f32 in [-1.5, -0.5] u [0.5, 1.5], in another order than torch's: within
    n * 2^-24 relative (n = 129 at most here)."""
    vtpu.set_mode(mode)
    g = torch.Generator().manual_seed(1)
    x = torch.rand(4, 129, 3, generator=g) + 0.5
    x = torch.where(torch.rand(4, 129, 3, generator=g) < 0.5, -x, x)
    got = torch.prod(x.to("tpu")) if dim is None else torch.prod(x.to("tpu"), dim, keepdim)
    want = torch.prod(x) if dim is None else torch.prod(x, dim, keepdim)
    assert got.shape == want.shape
    torch.testing.assert_close(got.cpu(), want, rtol=129 * 2**-24 * (4 * 3 if dim is None else 1), atol=0)
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def test_zeros_nan_and_bf16():
    x = torch.tensor([[2.0, 0.0, 3.0], [1.5, float("nan"), 2.0], [-1.0, 2.0, -4.0]])
    torch.testing.assert_close(x.to("tpu").prod(-1).cpu(), x.prod(-1), equal_nan=True, rtol=0, atol=0)
    b = x[2:].bfloat16()
    assert torch.equal(b.to("tpu").prod(-1).cpu(), b.prod(-1))
    out = torch.empty(3, device="tpu")
    torch.prod(x.to("tpu"), 1, out=out)
    torch.testing.assert_close(out.cpu(), x.prod(1), equal_nan=True, rtol=0, atol=0)


def test_integer_products_fall_back_with_the_reason():
    with pytest.raises(NotImplementedError, match="prod.*integer"):
        torch.prod(torch.arange(1, 6, dtype=torch.int32).to("tpu"))
