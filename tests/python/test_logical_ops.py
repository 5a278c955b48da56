"""Predicates, boolean algebra and all/any on the chip (torch_bridge/csrc/aten/logical.cc), and
the masked-attention path they serve: scaled_dot_product_attention with boolean masks, fully
masked rows included (torch's _safe_softmax gives them zeros), and is_causal (the fused kernel
since it exists: test_attention.py)."""
import pytest
import torch
import torch.nn.functional as F

import vtpu


@pytest.fixture(autouse=True)
def stays_on_the_chip(no_fallback):
    yield
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def special_values():
    x = torch.randn(5, 7)
    x[0, 1], x[1, 2], x[2, 3] = float("-inf"), float("inf"), float("nan")
    x[3, :] = float("-inf")
    return x


@pytest.mark.parametrize("op", [torch.isnan, torch.isinf, torch.isneginf, torch.isposinf, torch.logical_not])
def test_predicates_match_cpu(op):
    x = special_values()
    assert torch.equal(op(x.to("tpu")).cpu(), op(x))
    ints = torch.arange(6, dtype=torch.int32).view(2, 3)
    assert torch.equal(op(ints.to("tpu")).cpu(), op(ints))


def test_boolean_algebra_matches_cpu():
    x = special_values().nan_to_num(0.0)
    a, b = x > 0, x < 1
    at, bt = a.to("tpu"), b.to("tpu")
    assert torch.equal((at & bt).cpu(), a & b)
    assert torch.equal((at | bt).cpu(), a | b)
    assert torch.equal(torch.logical_and(x.to("tpu"), bt).cpu(), torch.logical_and(x, b))
    assert torch.equal(torch.logical_or(x.to("tpu"), bt).cpu(), torch.logical_or(x, b))


@pytest.mark.parametrize("args", [(), (0,), (1,), (1, True), ((0, 1),)])
def test_all_any_match_cpu(args):
    m = torch.isneginf(special_values())
    assert torch.equal(m.to("tpu").all(*args).cpu(), m.all(*args))
    assert torch.equal(m.to("tpu").any(*args).cpu(), m.any(*args))
    f = torch.randn(3, 4).round()  # non-bool inputs: nonzero is true
    assert torch.equal(f.to("tpu").all(1).cpu(), f.all(1))


@pytest.mark.parametrize("dtype", [torch.bool, torch.int8, torch.int32, torch.int64])
def test_bitwise_ops_on_integer_bit_patterns_match_cpu(dtype, no_fallback):
    torch.manual_seed(0)
    info = torch.iinfo(dtype) if dtype != torch.bool else None
    make = (lambda: torch.rand(4, 5) > 0.5) if info is None else (lambda: torch.randint(info.min, info.max, (4, 5), dtype=dtype))
    a, b = make(), make()
    cases = {
        "and": lambda x, y: x & y, "or": lambda x, y: x | y, "xor": lambda x, y: x ^ y, "not": lambda x, y: ~x,
        "or_broadcast_row": lambda x, y: x | y[:1], "xor_in_place": lambda x, y: x.clone().bitwise_xor_(y),
    }
    if dtype != torch.bool:
        cases["and_scalar"] = lambda x, y: x & 6
        cases["or_int32"] = lambda x, y: x | y.int()
    for name, f in cases.items():
        got, want = f(a.to("tpu"), b.to("tpu")).cpu(), f(a, b)
        assert got.dtype == want.dtype and torch.equal(got, want), name
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def test_bitwise_ops_on_floats_say_why():
    with pytest.raises(NotImplementedError, match="bitwise_and.*floating-point inputs"):
        torch.ones(3, device="tpu") & torch.ones(3, device="tpu")


@pytest.mark.parametrize("mode", ["strict_eager", "defer_and_fuse"])
def test_masked_attention_runs_on_the_chip(mode):
    vtpu.set_mode(mode)
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 6, 16) for _ in range(3))
    mask = torch.ones(6, 6, dtype=torch.bool).tril()
    mask[0] = False  # a fully masked row: zeros, not NaN
    dev = [t.to("tpu") for t in (q, k, v)]
    for kwargs, dev_kwargs in [({"attn_mask": mask}, {"attn_mask": mask.to("tpu")}), ({"is_causal": True}, {"is_causal": True})]:
        got = F.scaled_dot_product_attention(*dev, **dev_kwargs).cpu()
        want = F.scaled_dot_product_attention(q, k, v, **kwargs)
        assert not got.isnan().any()
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    vtpu.set_mode("defer_and_fuse")


def test_masked_fill_in_place():
    x = torch.randn(3, 5)
    xt = x.to("tpu")
    xt.masked_fill_(xt > 0, -1.5)
    assert torch.equal(xt.cpu(), x.masked_fill(x > 0, -1.5))
