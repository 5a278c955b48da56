"""torch.compile(backend="tpu"): registration by entry point, forward and backward against the CPU,
plans cached across calls, dynamic shapes without recompiles, graph breaks, clear errors."""
import pytest
import torch

import vtpu


def make_mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 8))


def fresh_compile(model, **kwargs):
    torch._dynamo.reset()
    vtpu.set_mode("defer_and_fuse")
    vtpu.synchronize()
    vtpu.reset_stats()
    return torch.compile(model, backend="tpu", **kwargs)


def test_backend_is_registered_by_entry_point(run_isolated):
    # A fresh process that never imports vtpu: torch's autoload and Dynamo's entry-point lookup find it.
    done = run_isolated("""
        import torch
        assert "tpu" in torch._dynamo.list_backends(), torch._dynamo.list_backends()
        f = torch.compile(lambda x: (x * 2).relu(), backend="tpu")
        print(f(torch.tensor([-1.0, 3.0], device="tpu")).cpu().tolist())
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[0.0, 6.0]"


def test_forward_and_backward_match_cpu_and_plans_are_cached():
    cpu = make_mlp()
    x, target = torch.randn(16, 32), torch.randn(16, 8)
    expected = cpu(x)
    ((expected - target) ** 2).mean().backward()
    expected_grads = [p.grad.clone() for p in cpu.parameters()]

    model = make_mlp().to("tpu")
    compiled = fresh_compile(model)
    for step in range(3):
        model.zero_grad()
        out = compiled(x.to("tpu"))
        ((out - target.to("tpu")) ** 2).mean().backward()
        torch.testing.assert_close(out.cpu(), expected, atol=1e-5, rtol=1e-5)
        for p, g in zip(model.parameters(), expected_grads):
            torch.testing.assert_close(p.grad.cpu(), g, atol=1e-5, rtol=1e-5)
    stats = vtpu.stats()
    assert stats["compiled_graphs"] == 2  # one forward, one backward; no recompiles
    assert stats["compiled_calls"] == 4  # each graph's calls after its first
    assert stats["compile_seconds"] > 0 and stats["first_call_seconds"] > 0 and stats["cached_call_seconds"] > 0
    assert stats["cpu_fallback_ops"] == 0
    # Each compiled graph runs as one flush; from the second step on its plan comes from the cache.
    assert stats["plan_cache_hits"] >= 4


def test_compiled_graph_runs_as_one_fused_flush():
    def block(x, w):
        return torch.nn.functional.gelu(x @ w + 1.0).sum(dim=-1)

    x, w = torch.randn(64, 128), torch.randn(128, 128) * 0.1
    compiled = fresh_compile(block)
    with torch.no_grad():
        out = compiled(x.to("tpu"), w.to("tpu"))
        vtpu.synchronize()
        stats = vtpu.stats()
        torch.testing.assert_close(out.cpu(), block(x, w), atol=1e-4, rtol=1e-4)
    assert stats["flushes"] <= 2  # the host copies' flush (if any) and the compiled graph's
    assert stats["kernels_launched"] < stats["ops_recorded"]  # matmul + add + gelu + sum fused


def test_dynamic_shapes_do_not_recompile():
    def attention_scores(q, k):
        return torch.softmax(q @ k.transpose(-1, -2) * 0.125, dim=-1)

    compiled = fresh_compile(attention_scores, dynamic=True)
    lengths = [8, 12, 16, 12]
    for n in lengths:
        q, k = torch.randn(2, n, 16), torch.randn(2, n, 16)
        torch.testing.assert_close(compiled(q.to("tpu"), k.to("tpu")).cpu(), attention_scores(q, k), atol=1e-5, rtol=1e-5)
    stats = vtpu.stats()
    assert stats["compiled_graphs"] == 1  # symbolic sizes: one Dynamo graph for every length
    # Kernels are specialised per concrete shape: one plan per distinct length, reused after.
    assert stats["plan_cache_misses"] == len(set(lengths))
    assert stats["plan_cache_hits"] >= 1


def test_dynamic_shapes_with_sdpa_take_the_math_path():
    # A dynamic trace has symbolic sizes, which the fused kernel's limits cannot be checked on:
    # F.scaled_dot_product_attention then traces as the math path (it used to fail the trace).
    def attend(q, k, v):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)

    compiled = fresh_compile(attend, dynamic=True)
    for n in [16, 24, 32]:
        q, k, v = (torch.randn(2, 4, n, 32) for _ in range(3))
        torch.testing.assert_close(compiled(*(t.to("tpu") for t in (q, k, v))).cpu(), attend(q, k, v), atol=1e-5, rtol=1e-5)
    assert vtpu.stats()["compiled_graphs"] == 1


def test_new_lengths_reuse_row_kernels():
    # Row counts are launch arguments: lengths in one power-of-two bucket share every program of a
    # block whose sequence axis is only ever a row axis (norms, Linear layers, activations).
    torch.manual_seed(0)
    block = torch.nn.Sequential(torch.nn.LayerNorm(64), torch.nn.Linear(64, 96), torch.nn.GELU(), torch.nn.Linear(96, 64))
    compiled = fresh_compile(block.to("tpu"), dynamic=True)
    generated = {}
    for n in [20, 24, 30, 40]:
        x = torch.randn(1, n, 64)
        before = vtpu.stats()["cache_misses"]
        with torch.no_grad():
            torch.testing.assert_close(compiled(x.to("tpu")).cpu(), block.cpu()(x), atol=1e-4, rtol=1e-4)
        block.to("tpu")
        generated[n] = vtpu.stats()["cache_misses"] - before
    assert vtpu.stats()["compiled_graphs"] == 1
    assert vtpu.stats()["plan_cache_misses"] == 4  # plans stay per shape (cheap); programs do not
    assert generated[24] == generated[30] == 0, generated  # same bucket (32 rows) as 20
    assert generated[40] > 0, generated  # the next bucket (64 rows) gets its own programs
    assert any(key.startswith("mm|1x64x") for key in vtpu.cached_programs())  # a matmul for the 64-row bucket


def test_new_lengths_generate_no_attention_kernels():
    # Column counts, contraction lengths, periods and view shapes are launch arguments too, so a
    # whole attention block (head split and merge, scores, causal mask, softmax, probs @ V) at a
    # new length inside a row bucket reuses every program of the first length.
    torch.manual_seed(0)
    heads, dim = 4, 64

    def attention(x, mask, w_qkv, w_out):
        b, s, _ = x.shape
        q, k, v = (x @ w_qkv).split(dim, dim=-1)
        q, k, v = (t.view(b, s, heads, dim // heads).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-1, -2) / (dim // heads) ** 0.5).masked_fill(mask, float("-inf"))
        out = torch.softmax(scores, dim=-1) @ v
        return out.transpose(1, 2).reshape(b, s, dim) @ w_out

    w_qkv, w_out = torch.randn(dim, 3 * dim) * 0.1, torch.randn(dim, dim) * 0.1
    compiled = fresh_compile(attention, dynamic=True)
    generated = {}
    for n in [17, 24, 31, 24]:
        x, mask = torch.randn(2, n, dim), torch.ones(n, n).tril() == 0  # causal
        before = vtpu.stats()["cache_misses"]
        with torch.no_grad():
            out = compiled(x.to("tpu"), mask.to("tpu"), w_qkv.to("tpu"), w_out.to("tpu")).cpu()
        generated[n] = vtpu.stats()["cache_misses"] - before
        torch.testing.assert_close(out, attention(x, mask, w_qkv, w_out), atol=1e-4, rtol=1e-4)
    assert vtpu.stats()["compiled_graphs"] == 1
    assert generated[17] > 0 and generated[24] == generated[31] == 0, generated


def test_graph_break_runs_the_rest_eagerly():
    def with_break(x):
        y = (x * 3).relu()
        if y.sum().item() > 0:  # data-dependent control flow: Dynamo breaks the graph here
            return y - 1
        return y + 1

    x = torch.randn(32)
    compiled = fresh_compile(with_break)
    torch.testing.assert_close(compiled(x.to("tpu")).cpu(), with_break(x))
    assert vtpu.stats()["compiled_graphs"] >= 2


def test_op_without_lowering_names_the_aten_op():
    vtpu.set_cpu_fallback(False)
    # LDL^T: neither lowered nor composed on the chip, and torch has no decomposition of it
    compiled = fresh_compile(lambda x: torch.linalg.ldl_factor(x @ x.mT + torch.eye(4, device=x.device))[0])
    with pytest.raises(NotImplementedError, match="linalg_ldl_factor"):
        compiled(torch.rand(4, 4, device="tpu"))


def test_default_backend_on_tpu_tensors_compiles_for_the_chip():
    # torch.compile without a backend means Inductor, whose "tpu" is Pallas (jax): graphs on the
    # virtual chip go to backend "tpu" instead; graphs on the CPU still go to Inductor.
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    x = torch.randn(3, 8)
    want = model(x)
    torch._dynamo.reset()
    vtpu.reset_stats()
    compiled = torch.compile(model.to("tpu"))
    torch.testing.assert_close(compiled(x.to("tpu")).detach().cpu(), want.detach(), atol=1e-5, rtol=1e-5)
    assert vtpu.stats()["compiled_graphs"] >= 1
