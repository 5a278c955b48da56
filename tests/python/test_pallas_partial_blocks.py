"""vtpu.pallas over arrays that are not whole blocks: a grid whose last blocks are partial, as
Pallas runs one (pl.cdiv's grid), against the CPU in both eager modes."""
import pathlib
import sys

import torch

import vtpu
from vtpu import pallas as pl

sys.path.insert(0, str(pathlib.Path(__file__).parents[2] / "examples"))
from pallas_matmul import matmul_kernel  # noqa: E402  (the Pallas tutorial's kernel)


def test_arrays_that_are_not_whole_blocks(each_eager_mode, no_fallback):
    """A grid over arrays that are not whole blocks (pl.cdiv's grid), the last blocks partial:
    inputs padded with zeros to whole blocks, outputs cut back to their shapes. A matmul's K
    padding adds zeros to its sums, so the product is exact."""

    def add(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] + y_ref[...] * 2

    tile = pl.BlockSpec((8, 128), lambda i, j: (i, j))
    f = pl.pallas_call(add, out_shape=pl.ShapeDtype((100, 300)), grid=(13, 3), in_specs=[tile, tile], out_specs=tile)
    x, y = torch.randn(100, 300), torch.randn(100, 300)
    got = f(x.to("tpu"), y.to("tpu"))
    assert got.shape == (100, 300)
    assert torch.equal(got.cpu(), x + y * 2)

    m, k, n, b = 200, 300, 260, 128
    mm = pl.pallas_call(matmul_kernel, out_shape=pl.ShapeDtype((m, n)), grid=(2, 3, 3),
                        in_specs=[pl.BlockSpec((b, b), lambda i, j, kk: (i, kk)), pl.BlockSpec((b, b), lambda i, j, kk: (kk, j))],
                        out_specs=pl.BlockSpec((b, b), lambda i, j, kk: (i, j)), scratch_shapes=[pl.VMEM((b, b), torch.float32)])
    a, w = torch.randn(m, k), torch.randn(k, n)
    product = mm(a.to("tpu"), w.to("tpu")).cpu()
    assert product.shape == (m, n)
    # bf16 products summed in f32 (Pallas's default precision), as the CPU sums the same products
    torch.testing.assert_close(product, a.bfloat16().float() @ w.bfloat16().float(), rtol=1e-5, atol=1e-4)
    assert vtpu.stats()["cpu_fallback_ops"] == 0
