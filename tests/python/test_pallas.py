"""vtpu.pallas: kernels over VMEM blocks on a grid, each API element against CPU references."""
import json
import pathlib
import sys

import pytest
import torch

import vtpu
from vtpu import pallas as pl

sys.path.insert(0, str(pathlib.Path(__file__).parents[2] / "examples"))
from pallas_matmul import blocked_matmul  # noqa: E402  (the Pallas tutorial's kernel)


def rows_of(block_rows, cols):
    return pl.BlockSpec((block_rows, cols), lambda i: (i, 0))


def test_vector_add_on_a_grid():
    def add(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] + y_ref[...] * 2

    f = pl.pallas_call(add, out_shape=pl.ShapeDtype((1024, 256)), grid=(4,), in_specs=[rows_of(256, 256)] * 2,
                       out_specs=rows_of(256, 256))
    x, y = torch.randn(1024, 256), torch.randn(1024, 256)
    torch.testing.assert_close(f(x.to("tpu"), y.to("tpu")).cpu(), x + y * 2, rtol=0, atol=0)


def test_elementwise_math_where_and_casts():
    def body(x_ref, i_ref, o_ref, n_ref):
        x = x_ref[...]
        o_ref[...] = pl.where(x > 0, pl.exp(-x) * pl.sigmoid(x), pl.maximum(x, -0.5)) + pl.tanh(x) / 3
        n_ref[...] = i_ref[...] * 3 + 1

    spec = rows_of(8, 384)
    f = pl.pallas_call(body, out_shape=[pl.ShapeDtype((32, 384), torch.bfloat16), pl.ShapeDtype((32, 384), torch.int32)],
                       grid=(4,), in_specs=[spec, spec], out_specs=[spec, spec])
    x, i = torch.randn(32, 384), torch.randint(-1000, 1000, (32, 384), dtype=torch.int32)
    o, n = f(x.to("tpu"), i.to("tpu"))
    expected = torch.where(x > 0, torch.exp(-x) * torch.sigmoid(x), torch.maximum(x, torch.tensor(-0.5))) + torch.tanh(x) / 3
    assert o.dtype == torch.bfloat16 and n.dtype == torch.int32
    torch.testing.assert_close(o.cpu(), expected.to(torch.bfloat16), rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(n.cpu(), i * 3 + 1, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("blocks", [(128, 128, 128), (256, 384, 256)])
def test_blocked_matmul_with_accumulator_and_when(dtype, blocks):
    x, y = torch.randn(512, 768).to(dtype), torch.randn(768, 512).to(dtype)
    f = blocked_matmul(512, 768, 512, *blocks, dtype)
    # The MXU multiplies bf16 values exactly and sums in f32 (as Pallas's default precision).
    expected = x.to(torch.bfloat16).double() @ y.to(torch.bfloat16).double()
    got = f(x.to("tpu"), y.to("tpu")).cpu().double()
    tolerance = 1e-4 if dtype == torch.float32 else 2 ** -8
    assert ((got - expected).abs() <= tolerance * expected.abs() + 1e-3).all()


def test_matmul_cycles_respect_the_roofline_and_the_pipelines_traffic():
    preset = json.loads((pathlib.Path(__file__).parents[2] / "sim" / "presets" / f"{vtpu.chip_name()}.json").read_text())
    flops_per_cycle = preset["peak_bf16_flops"]["value"] / preset["clock_hz"]["value"]
    m = k = n = 1024
    bm, bk, bn = 256, 512, 512
    f = blocked_matmul(m, k, n, bm, bk, bn, torch.bfloat16)
    x = torch.zeros(m, k, dtype=torch.bfloat16, device="tpu")
    vtpu.synchronize()
    vtpu.reset_stats()
    z = f(x, x)  # kept: a kernel whose result nobody reads is dropped before it runs, like any op's
    vtpu.synchronize()
    stats = vtpu.stats()
    assert stats["per_kernel"]["matmul_kernel"]["cycles"] >= 2 * m * n * k / flops_per_cycle
    # Both input blocks change at every grid step (K is the fastest axis); each output block is
    # written once, when the step after its last K step moves on.
    steps = (m // bm) * (n // bn) * (k // bk)
    assert stats["hbm_read_bytes"] == steps * (bm * bk + bk * bn) * 2
    assert stats["hbm_write_bytes"] == m * n * 2


def test_dot_assigned_directly_and_f32_weights():
    def body(x_ref, w_ref, o_ref):
        o_ref[...] = pl.dot(x_ref[...], w_ref[...])

    f = pl.pallas_call(body, out_shape=pl.ShapeDtype((64, 256)), grid=(2,),
                       in_specs=[rows_of(32, 128), pl.BlockSpec((128, 256), lambda i: (0, 0))], out_specs=rows_of(32, 256))
    x, w = torch.randn(64, 128), torch.randn(128, 256)
    expected = x.to(torch.bfloat16).double() @ w.to(torch.bfloat16).double()
    torch.testing.assert_close(f(x.to("tpu"), w.to("tpu")).cpu().double(), expected, rtol=1e-5, atol=1e-4)


def softmax_kernel(x_ref, o_ref):
    x = x_ref[...]
    e = pl.exp(x - pl.max(x))
    o_ref[...] = e / pl.sum(e)


def test_softmax_with_row_reductions():
    f = pl.pallas_call(softmax_kernel, out_shape=pl.ShapeDtype((64, 512)), grid=(8,), in_specs=[rows_of(8, 512)],
                       out_specs=rows_of(8, 512))
    x = torch.randn(64, 512) * 4
    torch.testing.assert_close(f(x.to("tpu")).cpu(), torch.softmax(x, -1), rtol=1e-5, atol=1e-6)


def test_fused_layer_norm():
    def layer_norm(x_ref, w_ref, b_ref, o_ref):
        x = x_ref[...]
        centered = x - pl.mean(x)
        inv = pl.rsqrt(pl.mean(centered * centered) + 1e-5)
        o_ref[...] = centered * inv * w_ref[...] + b_ref[...]

    param = pl.BlockSpec((1, 256), lambda i: (0, 0))  # a row vector, the same block every step: fetched once
    f = pl.pallas_call(layer_norm, out_shape=pl.ShapeDtype((128, 256)), grid=(8,),
                       in_specs=[rows_of(16, 256), param, param], out_specs=rows_of(16, 256))
    x, w, b = torch.randn(128, 256), torch.randn(256), torch.randn(256)
    got = f(x.to("tpu"), w.view(1, 256).to("tpu"), b.view(1, 256).to("tpu"))
    torch.testing.assert_close(got.cpu(), torch.nn.functional.layer_norm(x, (256,), w, b), rtol=1e-4, atol=1e-4)


def test_unchanged_input_block_is_fetched_once():
    def scale(x_ref, s_ref, o_ref):
        o_ref[...] = x_ref[...] * s_ref[...]

    spec = pl.BlockSpec((8, 128), lambda i: (0, 0))
    moving = pl.pallas_call(scale, out_shape=pl.ShapeDtype((8, 128)), grid=(16,), in_specs=[spec, spec], out_specs=spec)
    x = torch.randn(8, 128, device="tpu")
    vtpu.synchronize()
    vtpu.reset_stats()
    z = moving(x, x)  # noqa: F841  (kept alive until the flush)
    vtpu.synchronize()
    # Two input blocks read once and one output block written once, though the grid has 16 steps.
    assert vtpu.stats()["hbm_read_bytes"] == 2 * 8 * 128 * 4
    assert vtpu.stats()["hbm_write_bytes"] == 8 * 128 * 4


def test_traced_once_per_shape_and_source_shown():
    calls = []

    def body(x_ref, o_ref):
        calls.append(1)
        o_ref[...] = x_ref[...] + 1

    f = pl.pallas_call(body, out_shape=pl.ShapeDtype((8, 128)), in_specs=[None])
    x = torch.zeros(8, 128, device="tpu")
    f(x)
    f(x)
    assert len(calls) == 1
    source = f.source([x])
    assert source.startswith(".name body") and "vadd" in source


def test_custom_op_in_every_mode_and_compiled():
    def body(x_ref, o_ref):
        o_ref[...] = pl.silu(x_ref[...]) * 2

    f = pl.pallas_call(body, out_shape=pl.ShapeDtype((16, 128)), grid=(2,), in_specs=[rows_of(8, 128)],
                       out_specs=rows_of(8, 128))
    x = torch.randn(16, 128)
    expected = torch.nn.functional.silu(x + 1) * 2 - 1
    for mode in ("strict_eager", "defer_and_fuse"):
        vtpu.set_mode(mode)
        try:
            torch.testing.assert_close((f(x.to("tpu") + 1) - 1).cpu(), expected, rtol=1e-5, atol=1e-5)
        finally:
            vtpu.set_mode("defer_and_fuse")
    compiled = torch.compile(lambda t: f(t + 1) - 1, backend="tpu")
    torch.testing.assert_close(compiled(x.to("tpu")).cpu(), expected, rtol=1e-5, atol=1e-5)


def test_in_defer_and_fuse_a_kernel_is_a_node_of_the_pending_graph():
    def double(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2

    f = pl.pallas_call(double, out_shape=pl.ShapeDtype((8, 128)), in_specs=[None])
    x = torch.randn(8, 128)
    vtpu.synchronize()
    vtpu.reset_stats()
    y = torch.relu(f(torch.sigmoid(x.to("tpu"))) + 1)  # no flush until .cpu()
    assert vtpu.stats()["kernels_launched"] == 0
    torch.testing.assert_close(y.cpu(), torch.relu(torch.sigmoid(x) * 2 + 1))
    stats = vtpu.stats()
    assert stats["per_kernel"]["double"]["launches"] == 1
    assert stats["kernels_launched"] == 3  # sigmoid, the kernel, then add and relu fused


def test_autograd_through_a_backward_kernel():
    def square(x_ref, o_ref):
        o_ref[...] = x_ref[...] * x_ref[...]

    def square_grad(x_ref, g_ref, o_ref):
        o_ref[...] = 2 * x_ref[...] * g_ref[...]

    shape = pl.ShapeDtype((8, 128))
    grad = pl.pallas_call(square_grad, out_shape=shape, in_specs=[None, None])
    f = pl.pallas_call(square, out_shape=shape, in_specs=[None],
                       backward=lambda inputs, outputs, grads: [grad(inputs[0], grads[0])])
    x = torch.randn(8, 128)
    xt = x.to("tpu").requires_grad_()
    (f(xt) * 3).sum().backward()
    torch.testing.assert_close(xt.grad.cpu(), 6 * x, rtol=1e-6, atol=1e-6)


def error_of(kernel, **kwargs):
    x = torch.zeros(kwargs.pop("shape", (64, 256)), device="tpu")
    with pytest.raises((ValueError, RuntimeError)) as info:
        pl.pallas_call(kernel, **kwargs)(x)
    return str(info.value)


def copy(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def test_out_of_bounds_index_map_names_grid_index_and_line():
    message = error_of(copy, out_shape=pl.ShapeDtype((64, 256)), grid=(4,),
                       in_specs=[pl.BlockSpec((16, 256), lambda i: (i + 1, 0))], out_specs=rows_of(16, 256))
    assert "kernel 'copy': input 0's index map sends grid index (3,) to block (4, 0)" in message
    assert "test_pallas.py:" in message


def test_index_map_must_be_affine():
    message = error_of(copy, out_shape=pl.ShapeDtype((64, 256)), grid=(4,),
                       in_specs=[pl.BlockSpec((16, 256), lambda i: (i * i, 0))], out_specs=rows_of(16, 256))
    assert "program ids are multiplied by ints only" in message


def test_vmem_over_subscription():
    message = error_of(copy, shape=(4096, 4096), out_shape=pl.ShapeDtype((4096, 4096)), in_specs=[None])
    assert "kernel 'copy': its blocks need" in message and "bytes of VMEM" in message


def test_blocks_must_be_whole_tiles():
    narrow = pl.BlockSpec((8, 64), lambda i: (i, 0))
    message = error_of(copy, out_shape=pl.ShapeDtype((64, 256)), grid=(8,), in_specs=[narrow], out_specs=narrow)
    assert "block shape (8, 64): blocks are whole 8 x 128 tiles (or one row of them)" in message


def test_body_errors_name_the_line():
    def sliced(x_ref, o_ref):
        o_ref[...] = x_ref[0:5]

    message = error_of(sliced, out_shape=pl.ShapeDtype((64, 256)), in_specs=[None])
    assert "kernel 'sliced': a slice of 5 rows: slices span whole 8-row groups, or one row" in message
    assert "test_pallas.py:" in message

    def mismatched(x_ref, o_ref):
        o_ref[...] = pl.sum(x_ref[...])

    message = error_of(mismatched, out_shape=pl.ShapeDtype((64, 256)), in_specs=[None])
    assert "a (64, 1) value stored into a (64, 256) block" in message


def test_row_vectors_and_row_statistics_broadcast():
    def outer(c_ref, r_ref, o_ref, s_ref):
        s_ref[...] = pl.sum(c_ref[...])                    # (16, 1): each row's total
        o_ref[...] = s_ref[...] * r_ref[...] - r_ref[...]  # (16, 1) with (1, 256)

    f = pl.pallas_call(outer, out_shape=pl.ShapeDtype((16, 256)), in_specs=[None, None],
                       scratch_shapes=[pl.VMEM((16, 1))])
    c, r = torch.randn(16, 128), torch.randn(1, 256)
    torch.testing.assert_close(f(c.to("tpu"), r.to("tpu")).cpu(), c.sum(-1, keepdim=True) * r - r, rtol=1e-5, atol=1e-5)


def test_uninitialised_scratch_read_in_debug_mode():
    def reads_garbage(x_ref, o_ref, s_ref):
        o_ref[...] = x_ref[...]

        @pl.when(pl.program_id(0) == 2)
        def _():
            o_ref[...] = x_ref[...] + s_ref[...]  # never written

    x = torch.zeros(32, 128, device="tpu")
    f = pl.pallas_call(reads_garbage, out_shape=pl.ShapeDtype((32, 128)), grid=(4,), in_specs=[rows_of(8, 128)],
                       out_specs=rows_of(8, 128), scratch_shapes=[pl.VMEM((8, 128))])
    vtpu.set_mode("debug")
    try:
        with pytest.raises(RuntimeError) as info:
            f(x)
    finally:
        vtpu.set_mode("defer_and_fuse")
    message = str(info.value)
    assert "uninitialised VMEM" in message
    assert f"kernel 'reads_garbage', in the body's statement at {__file__}:" in message
    assert "at grid index (2,))" in message


def test_assembly_kernel_as_a_custom_op_with_autograd():
    source = (pathlib.Path(__file__).parents[2] / "examples" / "vector_add.s").read_text()
    n = 3000
    add = pl.assembly_call(source, pl.ShapeDtype((n,)), scalars=[n],
                           backward=lambda inputs, outputs, grads: [grads[0], grads[0]])
    a, b = torch.randn(n), torch.randn(n)
    at, bt = a.to("tpu").requires_grad_(), b.to("tpu").requires_grad_()
    c = add(at, bt)
    torch.testing.assert_close(c.detach().cpu(), a + b, rtol=0, atol=0)
    (c * torch.arange(n, device="tpu")).sum().backward()
    torch.testing.assert_close(bt.grad.cpu(), torch.arange(n, dtype=torch.float32))
    compiled = torch.compile(lambda x, y: add(x * 2, y) - 1, backend="tpu")
    torch.testing.assert_close(compiled(a.to("tpu"), b.to("tpu")).cpu(), a * 2 + b - 1, rtol=1e-6, atol=1e-6)


def gather_blocks_kernel(idx, x_ref, o_ref):
    i = pl.program_id(0)
    o_ref[...] = x_ref[...] * (idx[i] + 1)  # the entry is also a number in the body

    @pl.when(idx[i] == 0)
    def _():
        o_ref[...] = -x_ref[...]


def gather_blocks(blocks: int):
    return pl.pallas_call(gather_blocks_kernel, out_shape=pl.ShapeDtype((8 * blocks, 128)), grid_spec=pl.PrefetchScalarGridSpec(
        num_scalar_prefetch=1, grid=(blocks,), in_specs=[pl.BlockSpec((8, 128), lambda i, idx: (idx[i], 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i, idx: (i, 0))))


def test_scalar_prefetch_picks_blocks_and_feeds_the_body():
    x = torch.randn(32, 128)
    idx = torch.tensor([3, 0, 0, 2, 1], dtype=torch.int32)
    got = gather_blocks(5)(idx.to("tpu"), x.to("tpu")).cpu()
    for i, k in enumerate(idx.tolist()):
        block = x[8 * k:8 * k + 8]
        torch.testing.assert_close(got[8 * i:8 * i + 8], -block if k == 0 else block * (k + 1), rtol=0, atol=0)


def test_scalar_prefetch_entry_out_of_range_is_found_at_the_call():
    x = torch.randn(32, 128, device="tpu")
    with pytest.raises(ValueError) as info:
        gather_blocks(2)(torch.tensor([1, 4], dtype=torch.int32, device="tpu"), x)
    assert "input 0's index map sends grid index (1,) to block (4, 0), outside the 4 x 1 blocks" in str(info.value)


def test_iota_with_program_ids_gives_global_positions():
    def causal(x_ref, o_ref):
        rows = pl.iota((16, 256), 0) + pl.program_id(0) * 16  # the element's row in the whole array
        cols = pl.broadcasted_iota(torch.int32, (16, 256), 1) + pl.program_id(1) * 256
        o_ref[...] = pl.where(rows * 2 >= cols, x_ref[...], rows.astype(torch.float32) - cols)

    spec = pl.BlockSpec((16, 256), lambda i, j: (i, j))
    f = pl.pallas_call(causal, out_shape=pl.ShapeDtype((32, 512)), grid=(2, 2), in_specs=[spec], out_specs=spec)
    x = torch.randn(32, 512)
    rows, cols = torch.arange(32).view(-1, 1), torch.arange(512).view(1, -1)
    expected = torch.where(rows * 2 >= cols, x, (rows - cols).float())
    torch.testing.assert_close(f(x.to("tpu")).cpu(), expected, rtol=0, atol=0)
