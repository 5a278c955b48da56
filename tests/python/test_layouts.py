"""Results laid out as torch lays them out: elementwise ops follow TensorIterator's dim order,
clone and .to(dtype) keep a dense tensor's strides. torch.compile depends on it (AOT autograd
writes view(...) where the meta strides allow one), and each of these runs on the chip with no
host relayout."""
import pytest
import torch

import vtpu


def strided_cases():
    g = torch.Generator().manual_seed(0)
    base = torch.randn(2, 3, 5, 4, generator=g)
    qkv = torch.randn(1, 8, 3 * 4 * 16, generator=g).view(1, 8, 3, 4, 16)
    return {
        "transposed": base.transpose(1, 2),
        "permuted": base.permute(0, 3, 1, 2),
        "heads_of_a_packed_projection": qkv[:, :, 0].transpose(1, 2),  # (1, 4, 8, 16), not dense
        "matrix_t": base[0, 0].t(),
    }


CASES = strided_cases()


@pytest.mark.parametrize("mode", ["strict_eager", "defer_and_fuse"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_elementwise_results_take_torchs_strides(mode, case):
    vtpu.set_mode(mode)
    x = CASES[case]
    dx = torch.empty_strided(x.shape, x.stride(), device="tpu")
    dx.copy_(x)
    assert dx.stride() == x.stride()
    row = torch.randn(x.shape[-1], generator=torch.Generator().manual_seed(1))
    ops = {
        "neg": lambda t, r: -t,
        "exp": lambda t, r: t.exp(),
        "mul_scalar": lambda t, r: t * 3,
        "add_self": lambda t, r: t + t,
        "add_broadcast_row": lambda t, r: t + r,
        "where": lambda t, r: torch.where(t > 0, t, r),
        "gt": lambda t, r: t > 0,
        "clamp": lambda t, r: t.clamp(-0.5, 0.5),
    }
    relayouts = vtpu.stats()["host_relayouts"]
    for name, op in ops.items():
        expected = op(x, row)
        got = op(dx, row.to("tpu"))
        assert got.stride() == expected.stride(), (name, got.stride(), expected.stride())
        torch.testing.assert_close(got.cpu(), expected, msg=name)  # exp: the VPU's, within f32's default
    assert vtpu.stats()["host_relayouts"] == relayouts


@pytest.mark.parametrize("mode", ["strict_eager", "defer_and_fuse"])
def test_clone_and_casts_keep_a_dense_tensors_strides_on_the_chip(mode):
    vtpu.set_mode(mode)
    x = torch.randn(3, 5, 4).permute(2, 0, 1)  # dense, not contiguous
    d = x.to("tpu")
    assert d.stride() == x.stride()
    relayouts, fallbacks = vtpu.stats()["host_relayouts"], vtpu.stats()["cpu_fallback_ops"]
    for name, op in {"clone": lambda t: t.clone(), "to_bf16": lambda t: t.to(torch.bfloat16),
                     "contiguous": lambda t: t.contiguous(),
                     "clone_contiguous": lambda t: t.clone(memory_format=torch.contiguous_format)}.items():
        expected, got = op(x), op(d)
        assert got.stride() == expected.stride(), (name, got.stride(), expected.stride())
        assert torch.equal(got.cpu(), expected), name
    assert vtpu.stats()["host_relayouts"] == relayouts
    assert vtpu.stats()["cpu_fallback_ops"] == fallbacks


def test_compiled_graph_views_the_result_of_a_strided_elementwise_op():
    """AOT autograd's graph views (b, heads, s, d) -> (b, s, heads * d) after a transpose, which
    holds only if the elementwise op before it kept the transposed layout (ModernBERT, GTE and
    Nomic BERT's rotary embeddings)."""
    def rotary(qkv, cos):
        q = qkv.view(1, 8, 3, 4, 16)[:, :, 0].transpose(1, 2)  # (1, 4, 8, 16) over a packed buffer
        rotated = q * cos
        return rotated.transpose(1, 2).view(1, 8, -1)

    torch._dynamo.reset()
    vtpu.set_mode("defer_and_fuse")
    qkv, cos = torch.randn(1, 8, 192), torch.randn(1, 1, 8, 16)
    got = torch.compile(rotary, backend="tpu")(qkv.to("tpu"), cos.to("tpu"))
    torch.testing.assert_close(got.cpu(), rotary(qkv, cos))
