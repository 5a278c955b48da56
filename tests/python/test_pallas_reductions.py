"""vtpu.pallas reductions: over each row (axis 1, a (rows, 1) row statistic) and down each
column (axis 0, a (1, cols) row vector), against the CPU in float64."""
import pytest
import torch

from vtpu import pallas as pl


def whole(shape):
    return pl.BlockSpec(shape, lambda *ids: (0, 0))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32])
def test_column_sum_max_and_mean(dtype):
    def columns(x_ref, s_ref, m_ref, a_ref):
        x = x_ref[...]
        s_ref[...] = pl.sum(x, axis=0)
        m_ref[...] = pl.max(x, axis=0)
        a_ref[...] = pl.mean(x, axis=0)

    rows, cols = 40, 384
    out = [pl.ShapeDtype((1, cols))] * 3
    f = pl.pallas_call(columns, out_shape=out, in_specs=[None])
    x = (torch.randn(rows, cols) * 100).to(dtype) if dtype == torch.int32 else torch.randn(rows, cols).to(dtype)
    s, m, a = (y.cpu().double() for y in f(x.to("tpu")))
    reference = x.double()
    torch.testing.assert_close(s, reference.sum(0, keepdim=True), rtol=1e-6, atol=1e-5)
    torch.testing.assert_close(m, reference.amax(0, keepdim=True), rtol=0, atol=0)
    torch.testing.assert_close(a, reference.mean(0, keepdim=True), rtol=1e-6, atol=1e-6)


def test_reducing_a_row_statistic_or_a_row_vector_again():
    # A row statistic holds one value in every lane, a row vector one row: reducing them over the
    # axis they no longer have leaves them as they are (summing the lanes gave 128x the sum).
    def twice(x_ref, r_ref, c_ref, t_ref):
        x = x_ref[...]
        r_ref[...] = pl.sum(pl.sum(x)) + x * 0
        c_ref[...] = pl.max(pl.sum(x, axis=0), axis=0)
        t_ref[...] = pl.sum(pl.sum(x), axis=0) + c_ref[...] * 0  # the whole block's total

    f = pl.pallas_call(twice, out_shape=[pl.ShapeDtype((16, 256)), pl.ShapeDtype((1, 256)), pl.ShapeDtype((1, 256))],
                       in_specs=[None])
    x = torch.randn(16, 256)
    r, c, t = (y.cpu().double() for y in f(x.to("tpu")))
    reference = x.double()
    torch.testing.assert_close(r, reference.sum(1, keepdim=True).expand(16, 256), rtol=1e-6, atol=1e-5)
    torch.testing.assert_close(c, reference.sum(0, keepdim=True), rtol=1e-6, atol=1e-5)
    torch.testing.assert_close(t, reference.sum().expand(1, 256), rtol=1e-6, atol=1e-4)


def test_bias_gradient_accumulated_down_a_grid():
    # A Linear's bias gradient: the column sums of the output's gradient, the rows streamed a
    # block per grid step into an accumulator that the first step zeroes.
    def bias_grad(g_ref, o_ref, acc_ref):
        @pl.when(pl.program_id(0) == 0)
        def _():
            acc_ref[...] = acc_ref[...] * 0

        acc_ref[...] = acc_ref[...] + pl.sum(g_ref[...], axis=0)
        o_ref[...] = acc_ref[...]

    rows, cols, block = 512, 256, 64
    f = pl.pallas_call(bias_grad, out_shape=pl.ShapeDtype((1, cols)), grid=(rows // block,),
                       in_specs=[pl.BlockSpec((block, cols), lambda i: (i, 0))],
                       out_specs=pl.BlockSpec((1, cols), lambda i: (0, 0)), scratch_shapes=[pl.VMEM((1, cols))])
    g = torch.randn(rows, cols)
    torch.testing.assert_close(f(g.to("tpu")).cpu().double(), g.double().sum(0, keepdim=True), rtol=1e-5, atol=1e-4)


def test_reductions_keep_blocks_two_dimensional():
    def flat(x_ref, o_ref):
        o_ref[...] = pl.sum(x_ref[...], axis=0, keepdims=False)

    with pytest.raises(ValueError, match=r"kernel 'flat': reductions run over axis 0 or 1 \(-1\) with keepdims=True"):
        pl.pallas_call(flat, out_shape=pl.ShapeDtype((1, 256)), in_specs=[None])(torch.zeros(8, 256, device="tpu"))
