"""vtpu.pallas over arrays of more than 2 dims: block specs whose leading dims are None
(squeezed), one index per dim from the index map, against CPU references in every mode."""
import math

import pytest
import torch

from vtpu import pallas as pl


def test_attention_per_batch_and_head_over_4d_arrays(native_in_each_eager_mode):
    # One grid step per (batch, head, query block): q's block is (bq, d), the head's keys
    # (transposed) and values whole; the dots round their operands to bf16 and sum in f32.
    batch, heads, seq, d, bq = 2, 3, 256, 128, 128

    def attention(q_ref, kt_ref, v_ref, o_ref):
        s = pl.dot(q_ref[...], kt_ref[...]) * (1 / math.sqrt(d))
        p = pl.exp(s - pl.max(s))
        o_ref[...] = pl.dot(p / pl.sum(p), v_ref[...])

    per_head = pl.BlockSpec((None, None, seq, d), lambda b, h, i: (b, h, 0, 0))
    f = pl.pallas_call(attention, out_shape=pl.ShapeDtype((batch, heads, seq, d)), grid=(batch, heads, seq // bq),
                       in_specs=[pl.BlockSpec((None, None, bq, d), lambda b, h, i: (b, h, i, 0)),
                                 pl.BlockSpec((None, None, d, seq), lambda b, h, i: (b, h, 0, 0)), per_head],
                       out_specs=pl.BlockSpec((None, None, bq, d), lambda b, h, i: (b, h, i, 0)))
    q, k, v = (torch.randn(batch, heads, seq, d) for _ in range(3))
    got = f(q.to("tpu"), k.transpose(-1, -2).contiguous().to("tpu"), v.to("tpu")).cpu().double()

    def bf16(x):
        return x.to(torch.bfloat16).double()

    s = bf16(q) @ bf16(k).transpose(-1, -2) / math.sqrt(d)
    expected = bf16(torch.softmax(s, -1)) @ bf16(v)
    assert got.shape == (batch, heads, seq, d)
    torch.testing.assert_close(got, expected, rtol=0, atol=2e-3)


def test_three_dims_with_partial_blocks(native_in_each_eager_mode):
    def affine(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2 + 1

    spec = pl.BlockSpec((None, 8, 128), lambda b, i, j: (b, i, j))
    x = torch.randn(3, 20, 200)
    f = pl.pallas_call(affine, out_shape=pl.ShapeDtype(x.shape), grid=(3, 3, 2), in_specs=[spec], out_specs=spec)
    torch.testing.assert_close(f(x.to("tpu")).cpu(), x * 2 + 1, rtol=0, atol=0)
    compiled = torch.compile(lambda t: f(t.sin()) + 1, backend="tpu")
    torch.testing.assert_close(compiled(x.to("tpu")).cpu(), x.sin() * 2 + 2)


def test_a_leading_index_out_of_range_is_refused_though_the_flat_row_exists():
    # (b + 1, 0, 0) at b = 1 is row block 2 of the flattened (3 * 8, 128) array, inside it, but
    # outside the array's first dim.
    def copy(x_ref, o_ref):
        o_ref[...] = x_ref[...]

    f = pl.pallas_call(copy, out_shape=pl.ShapeDtype((3, 8, 128)), grid=(3,),
                       in_specs=[pl.BlockSpec((None, 8, 128), lambda b: (b + 1, 0, 0))],
                       out_specs=pl.BlockSpec((None, 8, 128), lambda b: (b, 0, 0)))
    with pytest.raises(ValueError, match=r"input 0's index map sends grid index \(2,\) to block \(3, 0, 0\), outside the "
                                         r"3 x 1 x 1 blocks"):
        f(torch.zeros(3, 8, 128, device="tpu"))


@pytest.mark.parametrize("block, index_map, message", [
    ((1, 8, 128), lambda b: (b, 0, 0), r"block shape \(1, 8, 128\): the body sees 2-D blocks, so every dim but the last "
                                       r"two is None"),
    ((8, 128), lambda b: (b, 0), r"has 3 dims but its block shape \(8, 128\) has 2"),
    ((None, 8, 128), lambda b: (b, 0), r"blocks of 3-D arrays need 3 indices"),
])
def test_blocks_of_higher_rank_arrays_are_checked(block, index_map, message):
    def copy(x_ref, o_ref):
        o_ref[...] = x_ref[...]

    spec = pl.BlockSpec(block, index_map)
    f = pl.pallas_call(copy, out_shape=pl.ShapeDtype((3, 8, 128)), grid=(3,), in_specs=[spec],
                       out_specs=pl.BlockSpec((None, 8, 128), lambda b: (b, 0, 0)))
    with pytest.raises(ValueError, match=message):
        f(torch.zeros(3, 8, 128, device="tpu"))


def test_a_higher_rank_array_needs_a_block_spec():
    def copy(x_ref, o_ref):
        o_ref[...] = x_ref[...]

    f = pl.pallas_call(copy, out_shape=pl.ShapeDtype((8, 128)), in_specs=[None])
    with pytest.raises(ValueError, match=r"kernel 'copy': input 0 of shape \(2, 8, 128\) needs a BlockSpec"):
        f(torch.zeros(2, 8, 128, device="tpu"))


def test_several_outputs_of_one_dtype_are_one_node_of_the_pending_graph():
    # In defer_and_fuse the kernel writes both outputs into one value of the pending graph,
    # nothing flushes until .cpu(), and the ops after it fuse as for any op.
    import vtpu

    def stats_kernel(x_ref, s_ref, m_ref):
        x = x_ref[...]
        s_ref[...] = x + pl.sum(x) * 0 + 1
        m_ref[...] = pl.max(x, axis=0)

    spec = pl.BlockSpec((None, 8, 256), lambda b: (b, 0, 0))
    f = pl.pallas_call(stats_kernel, out_shape=[pl.ShapeDtype((2, 8, 256)), pl.ShapeDtype((2, 1, 256))], grid=(2,),
                       in_specs=[spec], out_specs=[spec, pl.BlockSpec((None, 1, 256), lambda b: (b, 0, 0))])
    x = torch.randn(2, 8, 256)
    vtpu.synchronize()
    vtpu.reset_stats()
    s, m = f(torch.sigmoid(x.to("tpu")))
    y = s * 2 - m
    assert vtpu.stats()["kernels_launched"] == 0
    expected = torch.sigmoid(x)
    torch.testing.assert_close(y.cpu(), (expected + 1) * 2 - expected.amax(1, keepdim=True))
    assert vtpu.stats()["per_kernel"]["stats_kernel"]["launches"] == 1
    assert vtpu.stats()["cpu_fallback_ops"] == 0
    assert m.shape == (2, 1, 256) and s.shape == (2, 8, 256)


def test_outputs_of_several_dtypes_are_one_node_too():
    import vtpu

    def split(x_ref, h_ref, n_ref):
        h_ref[...] = x_ref[...] * 0.5
        n_ref[...] = (x_ref[...] * 10).astype(torch.int32)

    spec = pl.BlockSpec((8, 256), lambda i: (i, 0))
    f = pl.pallas_call(split, out_shape=[pl.ShapeDtype((16, 256), torch.bfloat16), pl.ShapeDtype((16, 256), torch.int32)],
                       grid=(2,), in_specs=[spec], out_specs=[spec, spec])
    x = torch.randn(16, 256)
    xt = x.to("tpu")
    vtpu.synchronize()
    vtpu.reset_stats()
    h, n = f(xt)
    y = h.float() + n
    assert vtpu.stats()["kernels_launched"] == 0 and h.dtype == torch.bfloat16 and n.dtype == torch.int32
    torch.testing.assert_close(y.cpu(), (x * 0.5).to(torch.bfloat16).float() + (x * 10).to(torch.int32), rtol=0, atol=0)
    assert vtpu.stats()["per_kernel"]["split"]["launches"] == 1
