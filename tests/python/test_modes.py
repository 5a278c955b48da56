"""defer_and_fuse against strict_eager: same results, fewer kernels, dead intermediates never
get HBM, the program cache, tracing, memory statistics and out-of-memory errors."""
import json

import pytest
import torch

import vtpu


def mlp(x, w1, b1, w2, b2):
    return torch.nn.functional.linear(torch.nn.functional.gelu(torch.nn.functional.linear(x, w1, b1)), w2, b2) + x


def run_in(mode, fn, *cpu_args):
    vtpu.set_mode(mode)
    vtpu.synchronize()
    vtpu.reset_stats()
    out = fn(*[a.to("tpu") for a in cpu_args]).cpu()
    stats = vtpu.stats()
    vtpu.set_mode("defer_and_fuse")
    return out, stats


def test_modes_agree_and_defer_fuses():
    torch.manual_seed(1)
    args = (torch.randn(64, 96), torch.randn(256, 96) * 0.1, torch.randn(256), torch.randn(96, 256) * 0.1, torch.randn(96))
    strict, s_stats = run_in("strict_eager", mlp, *args)
    fused, f_stats = run_in("defer_and_fuse", mlp, *args)
    torch.testing.assert_close(fused, strict, atol=0, rtol=0)  # same kernels' numerics, fused or not
    torch.testing.assert_close(fused, mlp(*args), atol=1e-4, rtol=1e-4)
    assert f_stats["kernels_launched"] < s_stats["kernels_launched"]
    assert f_stats["simulated_seconds"] < s_stats["simulated_seconds"]
    assert f_stats["hbm_read_bytes"] + f_stats["hbm_write_bytes"] < s_stats["hbm_read_bytes"] + s_stats["hbm_write_bytes"]
    assert f_stats["flushes"] == 1 and s_stats["flushes"] == s_stats["ops_recorded"]


@pytest.mark.parametrize("transposed", [False, True])
def test_a_matmul_followed_by_many_tensor_adds_still_lowers(transposed):
    """The matmul epilogue takes two operands (its drain's scalar registers); further adds run as
    an elementwise kernel after it instead of failing to lower (this used to raise)."""
    torch.manual_seed(2)
    x, w = torch.randn(300, 96), torch.randn(1100, 96) if transposed else torch.randn(96, 1100)
    adds = [torch.randn(300, 1100) for _ in range(4)]
    want = (x @ (w.t() if transposed else w)) + adds[0] + adds[1] + adds[2] + adds[3]
    vtpu.set_mode("defer_and_fuse")
    t = [a.to("tpu") for a in [x, w] + adds]
    got = (t[0] @ (t[1].t() if transposed else t[1])) + t[2] + t[3] + t[4] + t[5]
    torch.testing.assert_close(got.cpu(), want, rtol=1e-4, atol=1e-4)


def test_per_kernel_profile_and_unit_utilisation():
    torch.manual_seed(1)
    args = (torch.randn(64, 96), torch.randn(256, 96) * 0.1, torch.randn(256), torch.randn(96, 256) * 0.1, torch.randn(96))
    for mode in ("strict_eager", "defer_and_fuse"):
        _, stats = run_in(mode, mlp, *args)
        profile = stats["per_kernel"]
        # every launch and every simulated cycle is accounted to exactly one kernel label
        assert sum(p["launches"] for p in profile.values()) == stats["kernels_launched"]
        assert sum(p["cycles"] for p in profile.values()) == stats["simulated_cycles"]
        util = stats["unit_utilisation"]
        assert all(0.0 <= u <= 1.0 for u in util.values())
        mxu = [u for name, u in util.items() if name.endswith("mxu0")]
        assert mxu and mxu[0] > 0  # two linears ran on the MXU
    assert any("matmul" in label or "mm" in label for label in profile)


def test_dead_intermediates_never_get_hbm():
    vtpu.set_mode("defer_and_fuse")
    vtpu.synchronize()
    x = torch.randn(256, 256).to("tpu")
    base = torch.tpu.memory_allocated()
    torch.tpu.reset_peak_memory_stats()
    y = ((x * 2 + 1).exp() - x).relu()  # four intermediates of 256 KiB each, all dead at the flush
    y.cpu()
    assert torch.tpu.max_memory_allocated() - base <= 256 * 256 * 4 + 4096  # only y itself
    vtpu.reset_stats()
    z = x * 5  # never looked at, then dropped: never runs
    del z
    vtpu.synchronize()
    assert vtpu.stats()["ops_dead"] == 1 and vtpu.stats()["kernels_launched"] == 0


def test_a_flushs_intermediates_live_in_held_vmem_and_skip_the_hbm_round_trip():
    """Between two matmuls, the hidden activation of a deferred MLP is an intermediate: it lives
    in the VMEM a flush holds, never in HBM, and kernels reach it by local DMA. strict_eager
    writes every op's result to HBM (each is a tensor the user may read), so the same program
    there moves more HBM bytes; the numbers agree exactly."""
    torch.manual_seed(3)
    args = (torch.randn(64, 96), torch.randn(256, 96) * 0.1, torch.randn(256), torch.randn(96, 256) * 0.1, torch.randn(96))
    strict, s_stats = run_in("strict_eager", mlp, *args)
    fused, f_stats = run_in("defer_and_fuse", mlp, *args)
    torch.testing.assert_close(fused, strict, atol=0, rtol=0)
    torch.testing.assert_close(fused, mlp(*args), rtol=1e-4, atol=1e-4)
    hidden = 64 * 256 * 4
    assert s_stats["intermediates_held"] == 0 and s_stats["held_vmem_bytes"] == 0  # each op's result is an output
    assert f_stats["intermediates_held"] >= 1 and f_stats["intermediates_in_hbm"] == 0
    assert f_stats["held_vmem_bytes"] >= 2 * hidden  # written by the first matmul, read by the second
    hbm = lambda s: s["hbm_read_bytes"] + s["hbm_write_bytes"]
    assert hbm(f_stats) + 2 * hidden <= hbm(s_stats)
    # and held VMEM is reported beside HBM, free again after the flush
    memory = vtpu.stats()["memory"][0]
    assert memory["held_vmem_allocated_bytes"] == 0
    assert memory["held_vmem_capacity_bytes"] > 0
    assert "VMEM held" in torch.tpu.memory_summary()


def test_tensors_that_die_while_pending_give_their_hbm_back_after_their_last_reader():
    """a and b are dropped before the flush that reads them: a goes back once exp has read it,
    so the flush holds at most three of the four 1 MiB buffers (b, c, d), as eager mode would."""
    vtpu.set_mode("defer_and_fuse")
    vtpu.synchronize()
    base = torch.tpu.memory_allocated()
    a_cpu, b_cpu = torch.randn(512, 512) * 0.1, torch.randn(512, 512)
    a, b = a_cpu.to("tpu"), b_cpu.to("tpu")
    vtpu.synchronize()
    torch.tpu.reset_peak_memory_stats()
    c = a.exp()
    d = b * c.sum()  # launches: exp (a's last reader), sum, mul (b's)
    del a, b
    vtpu.synchronize()
    mib = 512 * 512 * 4
    assert torch.tpu.max_memory_allocated() - base <= 3 * mib + 4096
    assert torch.tpu.memory_allocated() - base == 2 * mib  # c and d
    torch.testing.assert_close(d.cpu(), b_cpu * a_cpu.exp().sum(), rtol=1e-5, atol=1e-3)  # freed after use, not before


def test_views_of_pending_results_do_not_flush():
    vtpu.set_mode("defer_and_fuse")
    a = torch.randn(4, 6, 8)
    x = a.to("tpu")
    vtpu.synchronize()
    vtpu.reset_stats()
    y = (x * 2).reshape(24, 8)   # a view of a pending result: an alias in the graph, no flush
    z = torch.softmax(y + 1, dim=-1).view(4, 6, 8)
    assert vtpu.stats()["flushes"] == 0
    torch.testing.assert_close(z.cpu(), torch.softmax(a.reshape(24, 8) * 2 + 1, -1).view(4, 6, 8))
    assert vtpu.stats()["flushes"] == 1


def test_program_cache_hits_on_repeated_kernels():
    vtpu.set_mode("defer_and_fuse")
    x = torch.randn(32, 64).to("tpu")
    (torch.tanh(x) * 3).cpu()
    vtpu.reset_stats()
    hits = vtpu.stats()["cache_hits"]
    # Another graph (its plan is new) that contains the same fused kernel: the program is reused.
    y, z = torch.tanh(x) * 3, x + 1
    vtpu.synchronize()
    assert vtpu.stats()["plan_cache_misses"] == 1
    assert vtpu.stats()["cache_hits"] > hits


def test_trace_writes_a_perfetto_timeline(tmp_path):
    path = tmp_path / "trace.json"
    x = torch.randn(128, 128).to("tpu")
    with vtpu.trace(str(path)):
        (x @ x).relu().cpu()
    events = json.loads(path.read_text())["traceEvents"]
    names = {e.get("name") for e in events}
    assert "mxu.mm" in names and any(e.get("ph") == "X" for e in events)


def test_several_chips_and_env_configuration(run_isolated):
    result = run_isolated("""
        import torch, vtpu
        print(torch.tpu.device_count(), vtpu.chip_name(), vtpu.get_mode())
        a = torch.ones(4, device="tpu:1") * 3
        print(a.device, a.sum(-1).item())
    """, VTPU_CHIPS=2, VTPU_CHIP="v6e", VTPU_MODE="strict_eager")
    assert result.returncode == 0, result.stderr
    assert "2 v6e strict_eager" in result.stdout and "tpu:1 12.0" in result.stdout


def test_import_torch_is_enough(run_isolated):
    result = run_isolated("""
        import sys, torch
        x = torch.ones(3, device="tpu") * 2
        print("vtpu" in sys.modules, x.cpu().tolist(), torch.accelerator.current_accelerator())
    """)
    assert result.returncode == 0, result.stderr
    assert "True [2.0, 2.0, 2.0] tpu" in result.stdout


def test_bad_mode_names_the_choices():
    with pytest.raises(Exception, match="strict_eager, defer_and_fuse"):
        vtpu.set_mode("lazy")


def test_repeated_steps_reuse_their_plan():
    vtpu.set_mode("defer_and_fuse")
    x, w = torch.randn(37, 53).to("tpu"), torch.randn(53, 61).to("tpu")  # shapes no other test uses
    vtpu.synchronize()
    vtpu.reset_stats()
    results = [torch.relu(x @ w + step).sum().item() for step in range(3)]
    stats = vtpu.stats()
    # The scalar is part of the graph's signature: three different graphs, three plans.
    assert stats["plan_cache_misses"] == 3 and stats["plan_cache_hits"] == 0
    vtpu.reset_stats()
    again = [torch.relu(x @ w + step).sum().item() for step in range(3)]
    stats = vtpu.stats()
    assert stats["plan_cache_hits"] == 3 and stats["plan_cache_misses"] == 0
    assert again == results


def test_wide_prologues_stay_within_the_row_kernel_operand_limit():
    # layer_norm over a sum of 12 tensors: a prologue of 12 inputs cannot fuse into the row kernel
    # (scalar registers), so it runs as an elementwise kernel first (it used to fail to lower).
    torch.manual_seed(3)
    xs, w, b = [torch.randn(8, 64) for _ in range(12)], torch.randn(64), torch.randn(64)
    vtpu.set_mode("defer_and_fuse")
    total = xs[0].to("tpu")
    for x in xs[1:]:
        total = total + x.to("tpu")
    out = torch.nn.functional.layer_norm(total, (64,), w.to("tpu"), b.to("tpu"))
    torch.testing.assert_close(out.cpu(), torch.nn.functional.layer_norm(sum(xs), (64,), w, b), atol=1e-5, rtol=1e-5)


def test_broadcasts_without_a_streaming_layout_are_expanded_on_the_chip():
    vtpu.set_cpu_fallback(False)  # [8,1] against [2,8,64] used to need the CPU
    torch.manual_seed(4)
    a, b = torch.randn(8, 1), torch.randn(2, 8, 64)
    vtpu.reset_stats()
    got = torch.where(a.to("tpu") > 0, a.to("tpu") + b.to("tpu"), b.to("tpu"))
    torch.testing.assert_close(got.cpu(), torch.where(a > 0, a + b, b), atol=0, rtol=0)
    assert vtpu.stats()["cpu_fallback_ops"] == 0


@pytest.mark.parametrize("dims,correction,keepdim", [((1, 2, 3), 1, True), ((1, 2, 3), 0, True), (None, 1, False), ((0,), 1, False)])
def test_var_mean_std_and_group_norm_run_on_the_chip(dims, correction, keepdim):
    vtpu.set_cpu_fallback(False)
    torch.manual_seed(5)
    x = torch.randn(2, 8, 5, 6) * 3 + 1
    var, mean = torch.var_mean(x.to("tpu"), dim=dims, correction=correction, keepdim=keepdim)
    want_var, want_mean = torch.var_mean(x, dim=dims, correction=correction, keepdim=keepdim)
    torch.testing.assert_close(var.cpu(), want_var, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(mean.cpu(), want_mean, atol=1e-6, rtol=1e-6)
    std = torch.std(x.to("tpu"), dim=dims, correction=correction, keepdim=keepdim)
    torch.testing.assert_close(std.cpu(), torch.std(x, dim=dims, correction=correction, keepdim=keepdim), atol=1e-5, rtol=1e-5)
    norm = torch.nn.GroupNorm(2, 8)
    torch.testing.assert_close(norm.to("tpu")(x.to("tpu")).cpu(), norm.cpu()(x), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_reductions_over_leading_dims_need_no_permute(dtype):
    # sum over tokens (a bias's gradient), mean/amax/amin over leading dims: one column reduction
    # kernel each, no transposing copy first.
    vtpu.set_cpu_fallback(False)
    torch.manual_seed(7)
    x = (torch.randn(3, 70, 300) * 2).to(dtype)
    tol = dict(atol=1e-4, rtol=1e-5) if dtype == torch.float32 else dict(atol=0.05, rtol=1 / 128)
    vtpu.reset_stats()
    xt = x.to("tpu")
    for got, want in [(xt.sum(0), x.float().sum(0)), (xt.sum((0, 1)), x.float().sum((0, 1))),
                      (xt.mean((0, 1), keepdim=True), x.float().mean((0, 1), keepdim=True)),
                      (xt.amax(0), x.amax(0)), (xt.amin((0, 1)), x.amin((0, 1)))]:
        torch.testing.assert_close(got.cpu().float(), want.float(), **tol)
    labels = vtpu.stats()["per_kernel"]
    assert not any("permute_for_reduction" in label for label in labels), labels
    assert vtpu.stats()["cpu_fallback_ops"] == 0


# Negative pads crop (padding="same" with an even kernel pads asymmetrically; its backward crops).
@pytest.mark.parametrize("pad,value", [((1, 2), 0.0), ((0, 3, 2, 0), 1.5), ((1, 1, 1, 1, 1, 1), -2.0), ((1, -2), 0.0),
                                       ((-1, 2, 0, -3), 0.5)])
def test_constant_padding_runs_on_the_chip(pad, value):
    vtpu.set_cpu_fallback(False)
    vtpu.reset_stats()
    x = torch.randn(2, 3, 5, 7)
    got = torch.nn.functional.pad(x.to("tpu"), pad, value=value)
    torch.testing.assert_close(got.cpu(), torch.nn.functional.pad(x, pad, value=value), atol=0, rtol=0)
    assert vtpu.stats()["cpu_fallback_ops"] == 0
    with pytest.raises(NotImplementedError, match="constant_pad_nd.*cropping everything"):
        torch.nn.functional.pad(x.to("tpu"), (-4, -3))


def test_batch_norm_eval_and_training_on_the_chip_update_running_stats():
    torch.manual_seed(6)
    cpu = torch.nn.BatchNorm2d(3)
    cpu.running_mean.normal_()
    cpu.running_var.uniform_(0.5, 2)
    cpu.weight.data.normal_()
    x = torch.randn(2, 3, 4, 5) * 2 + 1
    chip = torch.nn.BatchNorm2d(3)
    chip.load_state_dict(cpu.state_dict())
    chip = chip.to("tpu")
    vtpu.set_cpu_fallback(False)
    cpu.eval(), chip.eval()
    torch.testing.assert_close(chip(x.to("tpu")).cpu(), cpu(x), atol=1e-6, rtol=1e-6)  # all on the chip
    cpu.train(), chip.train()
    for _ in range(2):  # batch statistics on the chip too; the running statistics follow the CPU's
        torch.testing.assert_close(chip(x.to("tpu")).cpu(), cpu(x))
        torch.testing.assert_close(chip.running_mean.cpu(), cpu.running_mean)
        torch.testing.assert_close(chip.running_var.cpu(), cpu.running_var)
    assert vtpu.stats()["cpu_fallback_ops"] == 0


@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32])
def test_embedding_and_index_select_run_on_the_chip(index_dtype):
    vtpu.set_cpu_fallback(False)  # every op below runs on the chip, or the test fails
    torch.manual_seed(7)
    cpu = torch.nn.Embedding(97, 24)
    chip = torch.nn.Embedding(97, 24)
    chip.load_state_dict(cpu.state_dict())
    chip = chip.to("tpu")
    ids = torch.randint(0, 97, (3, 11), dtype=index_dtype)
    ids[0, 0], ids[2, 10] = 96, 0  # both ends of the table
    torch.testing.assert_close(chip(ids.to("tpu")).cpu(), cpu(ids), atol=0, rtol=0)
    table = torch.randn(40, 3, 5).bfloat16()
    pairs = torch.tensor([[5, 1], [39, 0], [5, 7]], dtype=index_dtype)
    strided = pairs.to("tpu")[:, 0]  # a non-contiguous view of device indices
    torch.testing.assert_close(torch.index_select(table.to("tpu"), 0, strided).cpu(), table[pairs[:, 0]], atol=0, rtol=0)
    cols = torch.tensor([4, 0, 2, 4], dtype=index_dtype)  # along the last dim: moved first and back on the chip
    picked = torch.index_select(table.to("tpu"), 2, cols.to("tpu"))
    torch.testing.assert_close(picked.cpu(), torch.index_select(table, 2, cols), atol=0, rtol=0)
    assert picked.is_contiguous()


def test_an_index_outside_the_table_raises_index_error_at_the_next_sync():
    vtpu.set_cpu_fallback(False)
    table = torch.randn(10, 4).to("tpu")
    for bad in ([2, 10], [-1]):
        picked = torch.index_select(table, 0, torch.tensor(bad).to("tpu"))  # deferred: no error yet
        with pytest.raises(IndexError, match="index out of range in self"):
            picked.cpu()
    assert torch.equal(torch.index_select(table, 0, torch.tensor([9]).to("tpu")).cpu(), table.cpu()[9:])  # still usable


def test_a_flush_that_fails_gives_back_its_intermediates():
    """The gather traps after the matmul and the softmax have written their intermediates (held
    VMEM, HBM for those too large for it): the failed flush frees them all, as a finished one
    would."""
    vtpu.set_mode("defer_and_fuse")
    vtpu.set_cpu_fallback(False)
    torch.manual_seed(0)
    a, w = torch.randn(1024, 128).to("tpu"), torch.randn(128, 9000).to("tpu")  # a @ w: 36.9 MB, past 32 MiB held
    bad = torch.tensor([3, 1024]).to("tpu")
    vtpu.synchronize()
    base = torch.tpu.memory_allocated()
    vtpu.reset_stats()
    picked = torch.index_select((a @ w).softmax(-1), 0, bad)
    with pytest.raises(IndexError, match="index out of range in self"):
        picked.cpu()
    stats = vtpu.stats()
    assert stats["memory"][0]["held_vmem_allocated_bytes"] == 0
    assert torch.tpu.memory_allocated() - base <= 2 * 9000 * 4 + 4096  # picked's own buffer at most


@pytest.mark.parametrize("beta,threshold", [(1.0, 20.0), (2.0, 5.0), (0.5, 10.0)])
def test_softplus_runs_on_the_chip(beta, threshold):
    vtpu.set_cpu_fallback(False)
    vtpu.reset_stats()
    x = torch.cat([torch.linspace(-30, 30, 1001), torch.tensor([-100.0, 100.0, 0.0])])
    got = torch.nn.functional.softplus(x.to("tpu"), beta, threshold).cpu()
    # Written with log(1 + exp(-|beta x|)) instead of torch's log1p: below 6e-8 / beta absolute
    # error where the result is tiny, f32 rounding elsewhere.
    torch.testing.assert_close(got, torch.nn.functional.softplus(x, beta, threshold), atol=2e-7 / beta, rtol=2e-7)
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def test_a_process_exits_cleanly_with_deferred_work_pending(run_isolated):
    """Exiting with pending results that hold input storages (an int64 index_put_ among them) used
    to destroy the recorder while releasing those storages called back into it: the heap was
    corrupted and the process aborted at exit."""
    done = run_isolated("""
        import torch, vtpu
        vtpu.set_mode("defer_and_fuse")
        a = torch.randn(64, 64).to("tpu")
        idx = torch.arange(64).to("tpu")
        kept = []
        for i in range(20):
            inv = torch.empty_like(idx)
            inv[idx] = torch.arange(64, device="tpu")
            kept.append((a * i + 1, inv))
        assert vtpu.stats()["ops_recorded"] > 0
        print("exiting with work pending")
    """)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "exiting with work pending" in done.stdout
