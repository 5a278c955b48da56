"""scaled_dot_product_attention on the fused attention kernel (torch_bridge/csrc/aten/attention.cc):
torch's backend choice, forward and backward against the CPU in both modes, the math path for
what the kernel does not run, and the memory the fused path saves (no [.., S, T] scores in HBM)."""
import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend

import vtpu


@pytest.fixture(autouse=True)
def stays_on_the_chip(no_fallback):
    yield
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def inputs(lead, s, t, e, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*lead, n, e, generator=g, dtype=dtype) for n in (s, t, t)]


def attention_kernels():
    return [label for label in vtpu.stats()["per_kernel"] if label == "scaled_dot_product_attention"]


def fused_backward_ran():
    return "attention_backward_fused" in vtpu.stats()["per_kernel"]


def test_torch_chooses_the_fused_kernel_only_for_what_it_runs():
    q, k, v = (t.to("tpu") for t in inputs((2, 3), 16, 24, 32))
    choice = lambda *a, **kw: torch.ops.aten._fused_sdp_choice(*a, **kw)
    assert choice(q, k, v) == SDPBackend.OVERRIDEABLE.value
    assert choice(q, k, v, is_causal=True) == SDPBackend.OVERRIDEABLE.value
    mask = torch.ones(16, 24, dtype=torch.bool, device="tpu")
    assert choice(q, k, v, attn_mask=mask) == SDPBackend.MATH.value
    assert choice(q, k, v, dropout_p=0.5) == SDPBackend.MATH.value
    wide = torch.randn(1, 8, 200, device="tpu")  # head dim over v5e's 128-wide MXU
    assert choice(wide, wide, wide) == SDPBackend.MATH.value
    assert choice(q, k, v[..., :16]) == SDPBackend.MATH.value  # value head dim differs
    assert choice(q.half(), k.half(), v.half()) == SDPBackend.MATH.value


@pytest.mark.parametrize("mode", ["strict_eager", "defer_and_fuse"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("lead,s,t,e", [((2, 3), 37, 50, 16), ((5,), 129, 7, 64), ((1, 2), 1, 1, 8)])
def test_forward_and_backward_match_the_cpu(mode, causal, lead, s, t, e):
    # Against the CPU in float64, so that only the chip's rounding is measured: once (one CI host),
    # the f32 gradients of the two sides differed by 8e-5 where both are within 1e-6 of float64 here.
    vtpu.set_mode(mode)
    exact = [x.double().requires_grad_() for x in inputs(lead, s, t, e)]
    cpu = [x.detach().float().requires_grad_() for x in exact]
    dev = [x.detach().float().to("tpu").requires_grad_() for x in exact]
    outputs = []
    for xs in (exact, cpu, dev):
        out = F.scaled_dot_product_attention(*xs, is_causal=causal)
        (out * out.detach().cos()).sum().backward()
        outputs.append(out.detach().cpu().double())
    torch.testing.assert_close(outputs[2], outputs[0], atol=2e-6, rtol=1e-5)
    for name, d, c, x in zip("qkv", dev, cpu, exact):
        cpu_error = (c.grad.double() - x.grad).abs().max().item()
        torch.testing.assert_close(d.grad.cpu().double(), x.grad, atol=2e-5, rtol=1e-4,
                                   msg=lambda m: f"grad of {name}: {m} (the CPU's own f32 error: {cpu_error:.2e})")
    assert attention_kernels(), "the fused kernel did not run"
    assert fused_backward_ran()  # f32 at 'highest' precision: six passes


@pytest.mark.parametrize("causal", [False, True])
def test_grouped_query_attention_runs_the_fused_kernel_forward_and_backward(causal):
    # 8 query heads sharing 2 key/value heads (Llama 3's grouping), enable_gqa as Hugging Face
    # passes it: the fused kernel and its backward serve it, the key/value gradients summed over
    # each group.
    g = torch.Generator().manual_seed(3)
    cpu = [torch.randn(2, h, 40, 32, generator=g).requires_grad_() for h in (8, 2, 2)]
    dev = [x.detach().to("tpu").requires_grad_() for x in cpu]
    want = F.scaled_dot_product_attention(*cpu, is_causal=causal, enable_gqa=True)
    got = F.scaled_dot_product_attention(*dev, is_causal=causal, enable_gqa=True)
    (want * want.detach().cos()).sum().backward()
    (got * got.detach().cos()).sum().backward()
    torch.testing.assert_close(got.cpu(), want.detach(), atol=2e-6, rtol=1e-5)
    for d, c in zip(dev, cpu):
        torch.testing.assert_close(d.grad.cpu(), c.grad, atol=2e-5, rtol=1e-4)
    assert attention_kernels() and fused_backward_ran()
    with pytest.raises(RuntimeError):  # heads that do not group are refused, as on the CPU
        F.scaled_dot_product_attention(dev[0], dev[1][:, :1].expand(2, 3, 40, 32), dev[2][:, :1].expand(2, 3, 40, 32),
                                       enable_gqa=True)


@pytest.mark.parametrize("mask", [None, "bool", "float"])
def test_grouped_decode_attention_reads_each_key_value_head_once(mask):
    # One new token per sequence against a cache (Hugging Face's decode step: not causal, a mask
    # shared by the heads when sequences are padded): the group's query heads fold into the query
    # rows of one attention per key/value head, with no repeated copy of the cache.
    g = torch.Generator().manual_seed(4)
    cpu = [torch.randn(3, h, n, 64, generator=g).requires_grad_() for h, n in ((8, 1), (2, 300), (2, 300))]
    masks = {None: None, "bool": torch.rand(3, 1, 1, 300, generator=g) > 0.2,
             "float": torch.randn(3, 1, 1, 300, generator=g)}
    dev = [x.detach().to("tpu").requires_grad_() for x in cpu]
    m = masks[mask]
    vtpu.synchronize()
    vtpu.reset_stats()
    want = F.scaled_dot_product_attention(*cpu, attn_mask=m, enable_gqa=True)
    got = F.scaled_dot_product_attention(*dev, attn_mask=None if m is None else m.to("tpu"), enable_gqa=True)
    torch.testing.assert_close(got.cpu(), want.detach(), atol=2e-6, rtol=1e-5)
    if mask is None:
        cache_bytes = sum(x.numel() * x.element_size() for x in cpu[1:])
        read = sum(k["hbm_read_bytes"] for k in vtpu.stats()["per_kernel"].values())
        assert attention_kernels() and read < 2 * cache_bytes  # repeated, the cache would be read 4 times over
    (want * want.detach().cos()).sum().backward()
    (got * got.detach().cos()).sum().backward()
    for d, c in zip(dev, cpu):
        torch.testing.assert_close(d.grad.cpu(), c.grad, atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("causal", [False, True])
def test_fused_backward_keeps_the_products_out_of_hbm(causal):
    """The fused backward at one MXU pass (f32 at precision 'medium': within bf16 input rounding
    of the CPU) and at six ('highest': within f32 rounding) keeps its peak HBM far below the math
    path's backward (a mask tensor sends it there), which holds [b, h, s, t] products (in HBM or
    in held VMEM)."""
    q, k, v = inputs((1, 4), 512, 512, 64)
    dout = torch.randn(1, 4, 512, 64, generator=torch.Generator().manual_seed(5))
    cpu = [x.clone().requires_grad_() for x in (q, k, v)]
    F.scaled_dot_product_attention(*cpu, is_causal=causal).backward(dout)
    mask = torch.ones(512, 512, dtype=torch.bool)
    mask = mask.tril() if causal else mask
    peaks, grads = {}, {}
    for path, precision in (("medium", "medium"), ("highest", "highest"), ("math", "highest")):
        torch.set_float32_matmul_precision(precision)
        try:
            dev = [x.to("tpu").requires_grad_() for x in (q, k, v)]
            kwargs = {"attn_mask": mask.to("tpu")} if path == "math" else {"is_causal": causal}
            out = F.scaled_dot_product_attention(*dev, **kwargs)
            dout_t = dout.to("tpu")
            vtpu.synchronize()
            vtpu.reset_stats()
            torch.tpu.reset_peak_memory_stats()
            base = torch.tpu.memory_allocated()
            out.backward(dout_t)
            vtpu.synchronize()
            # HBM and the VMEM a flush holds its intermediates in: the math path's products fit there
            held = vtpu.stats()["memory"][0]["held_vmem_peak_bytes"]
            peaks[path] = torch.tpu.max_memory_allocated() - base + held
            grads[path] = [x.grad.cpu() for x in dev]
            assert fused_backward_ran() == (path != "math")
        finally:
            torch.set_float32_matmul_precision("highest")
    for path, tolerance in (("medium", 1e-2), ("highest", 1e-5), ("math", 1e-5)):
        for got, c in zip(grads[path], cpu):
            scale = c.grad.abs().max().item()
            assert (got - c.grad).abs().max().item() <= tolerance * scale, path  # medium: q, k, v, dout, p, ds in bf16
    products = 4 * 512 * 512 * 4
    assert peaks["math"] >= products
    assert peaks["medium"] < products / 2
    assert peaks["highest"] < products / 2


def test_bf16_within_bf16_rounding():
    cpu = [x.requires_grad_() for x in inputs((2, 4), 64, 64, 32, dtype=torch.bfloat16)]
    dev = [x.detach().to("tpu").requires_grad_() for x in cpu]
    want = F.scaled_dot_product_attention(*cpu, is_causal=True)
    got = F.scaled_dot_product_attention(*dev, is_causal=True)
    want.float().square().sum().backward()
    got.float().square().sum().backward()
    assert got.dtype == torch.bfloat16
    # bf16 holds 8 significant bits: one rounding of the output, a few of the gradients' products
    torch.testing.assert_close(got.cpu().float(), want.detach().float(), atol=1e-2, rtol=1e-2)
    for d, c in zip(dev, cpu):
        torch.testing.assert_close(d.grad.cpu().float(), c.grad.float(), atol=5e-2, rtol=3e-2)
    assert fused_backward_ran()


def test_custom_scale_and_strided_inputs():
    # heads split from a [b, s, h * e] projection: q, k, v are transposed views, as in most models
    x = torch.randn(2, 20, 3 * 4 * 16)
    split = lambda t: t.reshape(2, 20, 4, 16).transpose(1, 2)
    want = F.scaled_dot_product_attention(*(split(t) for t in x.chunk(3, -1)), scale=0.3)
    got = F.scaled_dot_product_attention(*(split(t) for t in x.to("tpu").chunk(3, -1)), scale=0.3)
    torch.testing.assert_close(got.cpu(), want, atol=2e-6, rtol=1e-5)
    # laid out as torch's meta function says (the query's order, heads and positions swapped
    # dense), which torch.compile's traced views rely on
    assert got.transpose(1, 2).is_contiguous()


def test_compiled_attention_block_matches_the_cpu():
    def block(x):
        b, s, _ = x.shape
        q, k, v = (t.reshape(b, s, 4, 16).transpose(1, 2) for t in x.chunk(3, -1))
        return F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, 64)

    x = torch.randn(2, 24, 192, requires_grad=True)
    xt = x.detach().to("tpu").requires_grad_()
    want, got = block(x), torch.compile(block, backend="tpu")(xt)
    want.sum().backward()
    got.sum().backward()
    torch.testing.assert_close(got.cpu(), want.detach(), atol=2e-6, rtol=1e-5)
    torch.testing.assert_close(xt.grad.cpu(), x.grad, atol=2e-5, rtol=1e-4)
    assert attention_kernels(), "the compiled graph did not run the fused kernel"


def test_masks_still_run_on_the_math_path():
    q, k, v = inputs((2,), 8, 8, 16)
    mask = torch.rand(8, 8) > 0.3
    mask[:, 0] = True
    got = F.scaled_dot_product_attention(q.to("tpu"), k.to("tpu"), v.to("tpu"), attn_mask=mask.to("tpu"))
    torch.testing.assert_close(got.cpu(), F.scaled_dot_product_attention(q, k, v, attn_mask=mask), atol=1e-5, rtol=1e-5)
    assert not attention_kernels()


def test_fused_forward_keeps_the_scores_out_of_hbm():
    """The math path materialises [b, h, s, t] scores and probabilities (in the VMEM a flush
    holds for its intermediates, HBM when they do not fit); the fused kernel keeps them in its own
    VMEM, so its peak is about its inputs and output."""
    q, k, v = (x.to("tpu") for x in inputs((1, 4), 512, 512, 64))
    everything = torch.ones(512, 512, dtype=torch.bool, device="tpu")  # forces the math path, same result
    peaks = {}
    for name, kwargs in [("fused", {}), ("math", {"attn_mask": everything})]:
        vtpu.synchronize()
        torch.tpu.reset_peak_memory_stats()
        base = torch.tpu.memory_allocated()
        with torch.no_grad():
            out = F.scaled_dot_product_attention(q, k, v, **kwargs)
        vtpu.synchronize()
        held = vtpu.stats()["memory"][0]["held_vmem_peak_bytes"]
        peaks[name] = torch.tpu.max_memory_allocated() - base + held
        peaks[name + "_out"] = out.cpu()
    torch.testing.assert_close(peaks["fused_out"], peaks["math_out"], atol=2e-6, rtol=1e-5)
    scores_bytes = 4 * 512 * 512 * 4
    assert peaks["math"] >= scores_bytes
    assert peaks["fused"] < scores_bytes / 4


def test_fused_backward_on_a_256_wide_mxu(run_isolated):
    """v6e's MXUs are 256 wide: the fused backward pairs two 128-wide blocks per MXU there, and
    matches the CPU as on v5e."""
    result = run_isolated("""
        import torch, torch.nn.functional as F, vtpu
        g = torch.Generator().manual_seed(0)
        cpu = [torch.randn(2, 3, n, 48, generator=g, dtype=torch.bfloat16).requires_grad_() for n in (150, 150, 150)]
        dev = [x.detach().to("tpu").requires_grad_() for x in cpu]
        F.scaled_dot_product_attention(*cpu, is_causal=True).float().square().sum().backward()
        F.scaled_dot_product_attention(*dev, is_causal=True).float().square().sum().backward()
        err = max(((d.grad.cpu().float() - c.grad.float()).abs().max() / c.grad.float().abs().max()).item()
                  for d, c in zip(dev, cpu))
        print(vtpu.chip_name(), "attention_backward_fused" in vtpu.stats()["per_kernel"], f"{err:.4f}")
    """, VTPU_CHIP="v6e")
    assert result.returncode == 0, result.stderr
    chip, fused, err = result.stdout.split()
    assert (chip, fused) == ("v6e", "True")
    assert float(err) < 3e-2  # bf16 inputs and products, as test_bf16_within_bf16_rounding
