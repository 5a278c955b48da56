"""Device semantics of "tpu": creation, copies, views, in-place ops, dtypes, scalars, printing,
RNG, memory statistics, errors. Every numeric result is compared with the same computation on
the CPU."""
import warnings

import pytest
import torch

import vtpu


@pytest.fixture(autouse=True, params=["defer_and_fuse", "strict_eager"])
def mode(request):
    vtpu.set_mode(request.param)
    vtpu.set_cpu_fallback(False)
    yield request.param
    vtpu.synchronize()
    vtpu.set_mode("defer_and_fuse")


def test_device_is_registered_as_tpu():
    assert torch.tpu.is_available()
    assert torch.tpu.device_count() >= 1
    x = torch.ones(3, device="tpu")
    assert x.device.type == "tpu" and x.is_tpu
    assert torch.accelerator.current_accelerator().type == "tpu"


def test_round_trip_keeps_values_and_dtypes():
    for dtype in (torch.float32, torch.bfloat16, torch.int32, torch.int8, torch.bool, torch.int64, torch.float16):
        x = (torch.arange(-6, 6).reshape(3, 4) * 3).to(dtype)
        y = x.to("tpu")
        assert y.dtype == dtype
        assert torch.equal(y.cpu(), x)


def test_zeros_ones_full_and_item():
    assert torch.equal(torch.zeros(2, 3, device="tpu").cpu(), torch.zeros(2, 3))
    assert torch.equal(torch.ones(5, device="tpu", dtype=torch.bfloat16).cpu(), torch.ones(5, dtype=torch.bfloat16))
    assert torch.full((4,), 2.5, device="tpu").sum(-1).item() == 10.0


def test_views_share_storage_and_slices_write_through():
    x = torch.arange(12, dtype=torch.float32).to("tpu")
    v = x.view(3, 4)
    assert v.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    v[1].fill_(-1.0)  # a slice: written through the host, still visible through x
    expected = torch.arange(12, dtype=torch.float32)
    expected[4:8] = -1
    assert torch.equal(x.cpu(), expected)
    t = v.t()  # a non-contiguous view used by an op is made dense first, by a strided-copy kernel
    relayouts = vtpu.stats()["host_relayouts"]
    assert torch.equal((t * 2).cpu(), expected.view(3, 4).t() * 2)
    assert torch.equal(x.expand(2, 12).permute(1, 0).contiguous().cpu(), expected.expand(2, 12).permute(1, 0))
    assert vtpu.stats()["host_relayouts"] == relayouts


@pytest.mark.parametrize("mode", ["strict_eager", "defer_and_fuse"])
def test_contiguous_of_a_view_is_one_copy_kernel(mode):
    """x.t().contiguous() (clone = empty + copy_) writes the strided copy straight into the new
    tensor: one kernel, not a strided copy then an elementwise copy of its result. A copy_ from a
    tensor that keeps its own buffer, or to another dtype, is still a kernel of its own."""
    vtpu.set_mode(mode)
    a = torch.randn(5, 7)
    x = a.to("tpu")
    vtpu.synchronize()
    launched = vtpu.stats()["kernels_launched"]
    y = x.t().contiguous()
    assert torch.equal(y.cpu(), a.t())
    assert vtpu.stats()["kernels_launched"] - launched == 1
    z = torch.empty(5, 7, device="tpu")
    z.copy_(x)  # x keeps its buffer: z gets a copy of its own
    w = torch.empty(5, 7, device="tpu", dtype=torch.bfloat16).copy_(x)
    x.add_(1.0)
    assert torch.equal(z.cpu(), a) and torch.equal(w.cpu(), a.bfloat16())
    vtpu.set_mode("defer_and_fuse")


@pytest.mark.parametrize("mode", ["strict_eager", "defer_and_fuse"])
def test_transposed_matmul_operands_need_no_transpose_kernel(mode):
    """x.t() @ dy (a Linear's weight gradient) and a bmm with both operands transposed read the
    dense tensors as they are: one matmul kernel, no layout copy first."""
    vtpu.set_mode(mode)
    g = torch.Generator().manual_seed(3)
    x, dy = torch.randn(70, 20, generator=g), torch.randn(70, 30, generator=g)
    p, q = torch.randn(4, 9, 5, generator=g), torch.randn(4, 7, 9, generator=g)
    xt, dyt, pt, qt = x.to("tpu"), dy.to("tpu"), p.to("tpu"), q.to("tpu")
    vtpu.synchronize()
    launched = vtpu.stats()["kernels_launched"]
    grad_w = xt.t() @ dyt
    both = torch.bmm(pt.transpose(1, 2), qt.transpose(1, 2))
    torch.testing.assert_close(grad_w.cpu(), x.t() @ dy, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(both.cpu(), torch.bmm(p.transpose(1, 2), q.transpose(1, 2)), rtol=1e-5, atol=1e-5)
    assert vtpu.stats()["kernels_launched"] - launched == 2
    vtpu.set_mode("defer_and_fuse")


@pytest.mark.parametrize("mode", ["strict_eager", "defer_and_fuse"])
def test_resize_grows_the_storage_on_the_chip(mode):
    """Growing resize_ (out= tensors, torch.empty(0) buffers) keeps the old bytes and the storage
    its views share; it used to crash in a host memcpy of device addresses."""
    vtpu.set_mode(mode)
    t = torch.arange(4.0, device="tpu")
    view = t[:2]
    t.resize_(3, 5)
    assert t.shape == (3, 5) and t.cpu().flatten()[:4].tolist() == [0.0, 1.0, 2.0, 3.0]
    t.fill_(7.0)
    assert view.cpu().tolist() == [7.0, 7.0]  # the view shares the grown storage
    vtpu.set_mode("defer_and_fuse")


def test_in_place_ops_and_aliasing_reads():
    a = torch.randn(8, 16)
    x = a.to("tpu")
    y = x * 3  # pending in defer mode: reads x before x is overwritten below
    x.add_(1.0)
    x.mul_(torch.full((16,), 2.0, device="tpu"))
    assert torch.allclose(x.cpu(), (a + 1) * 2)
    assert torch.allclose(y.cpu(), a * 3)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_elementwise_ops_match_cpu(dtype):
    a = torch.randn(7, 130).to(dtype)
    b = torch.rand(130).to(dtype) + 0.5
    x, y = a.to("tpu"), b.to("tpu")
    tol = dict(atol=1e-6, rtol=1e-5) if dtype == torch.float32 else dict(atol=1e-2, rtol=1e-2)
    for fn in (lambda p, q: p + q, lambda p, q: p - 2 * q, lambda p, q: p * q, lambda p, q: p / q,
               lambda p, q: torch.maximum(p, q), lambda p, q: torch.where(p > 0, p, q),
               lambda p, q: torch.nn.functional.gelu(p) * q, lambda p, q: torch.sigmoid(p) + torch.tanh(q),
               lambda p, q: torch.exp(p.clamp(-3, 3)) - torch.log(q), lambda p, q: torch.sqrt(q) * torch.rsqrt(q),
               lambda p, q: torch.relu(p) ** 2, lambda p, q: torch.nn.functional.silu(p).abs().neg()):
        torch.testing.assert_close(fn(x, y).cpu(), fn(a, b), **tol)


def test_comparisons_give_bool():
    a = torch.randn(5, 5)
    x = a.to("tpu")
    got = x > 0.1
    assert got.dtype == torch.bool
    assert torch.equal(got.cpu(), a > 0.1)
    assert torch.equal((x == x).cpu(), torch.ones(5, 5, dtype=torch.bool))


def test_matmul_linear_softmax_layer_norm_match_cpu():
    torch.manual_seed(0)
    a, w, b = torch.randn(33, 70), torch.randn(20, 70), torch.randn(20)
    x = a.to("tpu")
    lin = torch.nn.functional.linear(x, w.to("tpu"), b.to("tpu"))
    torch.testing.assert_close(lin.cpu(), torch.nn.functional.linear(a, w, b), atol=1e-4, rtol=1e-4)
    sm = torch.softmax(lin, dim=-1)
    torch.testing.assert_close(sm.cpu(), torch.softmax(torch.nn.functional.linear(a, w, b), -1), atol=1e-5, rtol=1e-4)
    ln = torch.nn.functional.layer_norm(x, (70,))
    torch.testing.assert_close(ln.cpu(), torch.nn.functional.layer_norm(a, (70,)), atol=1e-5, rtol=1e-4)
    q, k = torch.randn(4, 9, 16), torch.randn(4, 11, 16)
    scores = q.to("tpu") @ k.to("tpu").transpose(-1, -2)
    torch.testing.assert_close(scores.cpu(), q @ k.transpose(-1, -2), atol=1e-4, rtol=1e-4)
    out = torch.empty(1, device="tpu")  # the out= form resizes its output, as mixture-of-experts layers use it
    torch.mm(x, w.to("tpu").t(), out=out)
    torch.testing.assert_close(out.cpu(), a @ w.t(), atol=1e-4, rtol=1e-4)


def test_reductions_over_the_last_dim():
    a = torch.randn(6, 300)
    x = a.to("tpu")
    torch.testing.assert_close(x.sum(-1).cpu(), a.sum(-1), atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(x.mean(-1, keepdim=True).cpu(), a.mean(-1, keepdim=True), atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(x.amax(-1).cpu(), a.amax(-1))


def test_matmul_precision_setting_changes_accuracy():
    a, b = torch.randn(64, 256), torch.randn(256, 64)
    exact = a.double() @ b.double()
    errors = {}
    for precision in ("medium", "highest"):
        torch.set_float32_matmul_precision(precision)
        errors[precision] = ((a.to("tpu") @ b.to("tpu")).cpu().double() - exact).abs().max().item()
    torch.set_float32_matmul_precision("highest")
    assert errors["highest"] < errors["medium"] / 100  # 6 bf16 passes vs 1


def test_rng_is_reproducible_per_seed():
    torch.tpu.manual_seed(123)
    a = torch.randn(4, 4, device="tpu").cpu()
    torch.tpu.manual_seed(123)
    b = torch.randn(4, 4, device="tpu").cpu()
    torch.tpu.manual_seed(124)
    c = torch.randn(4, 4, device="tpu").cpu()
    assert torch.equal(a, b) and not torch.equal(a, c)
    state = torch.tpu.get_rng_state()
    d = torch.rand(3, device="tpu").cpu()
    torch.tpu.set_rng_state(state)
    assert torch.equal(torch.rand(3, device="tpu").cpu(), d)


def test_random_numbers_are_made_on_the_chip():
    vtpu.set_cpu_fallback(False)  # rand, randn, bernoulli_ and dropout all run as kernels
    torch.tpu.manual_seed(5)
    before, fallbacks = vtpu.stats()["kernels_launched"], vtpu.stats()["cpu_fallback_ops"]
    u = torch.rand(50000, device="tpu").cpu()
    z = torch.randn(200, 250, device="tpu", dtype=torch.bfloat16).float().cpu()
    assert vtpu.stats()["kernels_launched"] >= before + 2 and vtpu.stats()["host_to_device_bytes"] > 0
    assert 0 <= u.min() and u.max() < 1
    # Kolmogorov-Smirnov against U(0, 1): 1.63 / sqrt(n) is the 1% critical value.
    assert (torch.arange(1, 50001) / 50000 - u.sort().values).abs().max() < 1.63 / 50000**0.5
    assert abs(z.mean()) < 0.02 and abs(z.std() - 1) < 0.02  # ~3 standard errors at n = 50000
    kept = torch.nn.functional.dropout(torch.ones(20000, device="tpu"), p=0.3, training=True).cpu()
    assert set(kept.unique().tolist()) <= {0.0, torch.tensor(1 / 0.7).item()} and abs((kept == 0).float().mean() - 0.3) < 0.015
    w = torch.ones(1000, device="tpu", requires_grad=True)
    y = torch.nn.functional.dropout(w, p=0.5, training=True)
    y.sum().backward()
    assert torch.equal(w.grad.cpu(), y.detach().cpu())  # the backward reuses the forward's mask and scale
    coin = torch.empty(20000, device="tpu").bernoulli_(0.25).cpu()
    assert set(coin.unique().tolist()) <= {0.0, 1.0} and abs(coin.mean() - 0.25) < 0.015
    p = torch.tensor([0.0, 0.2, 0.9, 1.0], device="tpu").repeat(10000)  # a probability per element
    coins = torch.bernoulli(p).view(10000, 4).cpu()
    assert coins[:, 0].sum() == 0 and coins[:, 3].sum() == 10000 and abs(coins[:, 1].mean() - 0.2) < 0.015
    x = torch.cat([-torch.rand(20000), torch.rand(100) + 0.1]).to("tpu")
    scaled = torch.nn.functional.rrelu(x, 0.1, 0.3, training=True).cpu()  # negatives times U(0.1, 0.3)
    slopes = scaled[:20000] / x[:20000].cpu()
    assert 0.1 <= slopes.min() and slopes.max() <= 0.3 and abs(slopes.mean() - 0.2) < 0.005
    assert torch.equal(scaled[20000:], x[20000:].cpu())
    assert vtpu.stats()["cpu_fallback_ops"] == fallbacks


def test_reductions_and_scans_longer_than_a_row_kernel_are_split():
    vtpu.set_cpu_fallback(False)
    x = torch.randn(3, 250, 400)  # 100000 elements per reduction: two row-kernel passes
    got = x.to("tpu").sum(dim=(1, 2)).cpu()
    torch.testing.assert_close(got, x.sum(dim=(1, 2)), rtol=1e-5, atol=1e-3)
    assert torch.equal(x.to("tpu").amax().cpu(), x.amax())
    long_rows = torch.randn(2, 70000)  # softmax composes from the long reductions
    torch.testing.assert_close(torch.softmax(long_rows.to("tpu"), -1).cpu(), torch.softmax(long_rows, -1))
    # a scan in blocks of 2048, each offset by the scan of the blocks' totals (kernels/compose/cumsum.cc)
    torch.testing.assert_close(long_rows.to("tpu").cumsum(-1).cpu(), long_rows.cumsum(-1), rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize("mode", ["strict_eager", "defer_and_fuse"])
def test_a_result_past_one_launchs_reach_is_refused_when_recorded(mode):
    """2^31 elements is the most one kernel launch addresses. A broadcast's result that large
    cannot run as launches over ranges of flat data (kernels/graph/window_pieces.h: only operands
    of its size or of one element can), so it is refused by the op that makes it, so it can fall
    back, instead of failing the whole flush later (SAM 3 tracker's mask decoder did). The refusal
    comes before any HBM is taken for the result."""
    vtpu.set_mode(mode)
    a, b = torch.randn(2**16, 1).to("tpu"), torch.randn(1, 2**15).to("tpu")
    allocated = torch.tpu.memory_allocated()
    with pytest.raises(NotImplementedError, match=r"aten::gt cannot run on the chip: a tensor too large for one launch"):
        a > b  # 2^31 bools
    assert torch.tpu.memory_allocated() == allocated
    assert torch.equal((a[:4] > b[:, :3]).cpu(), a[:4].cpu() > b[:, :3].cpu())  # the device still works


@pytest.mark.parametrize("mode", ["strict_eager", "defer_and_fuse"])
def test_a_long_narrow_tensor_runs_elementwise_on_the_chip(mode):
    """[2^24 + 1024, 1]: programs are generated for bucketed sizes (rows to 2^25, one column to a
    128-lane vreg), which would pass one launch's 2^31 elements though the tensor has 2^24; such a
    pointwise kernel runs as a lane-dense flat view instead (SAM 3 tracker's padding zeros)."""
    vtpu.set_mode(mode)
    x = torch.randn(2**24 + 1024, 1, generator=torch.Generator().manual_seed(0))
    fallbacks = vtpu.stats()["cpu_fallback_ops"]
    got = (x.to("tpu") * 2 + 1).cpu()
    assert torch.equal(got, x * 2 + 1)
    assert vtpu.stats()["cpu_fallback_ops"] == fallbacks


def test_printing_shows_values_and_device():
    text = repr(torch.tensor([1.5, -2.0]).to("tpu"))
    assert "1.5000" in text and "-2.0000" in text and "device='tpu:0'" in text


def test_unlowered_op_names_the_op_unless_fallback_is_allowed():
    # gcd: no lowering, and torch's decomposition is a prim that comes back to it
    x = torch.arange(1, 7, dtype=torch.int32).to("tpu")
    with pytest.raises(NotImplementedError, match="gcd"):
        torch.gcd(x, x + 2).cpu()
    vtpu.set_cpu_fallback(True)
    before = vtpu.stats()["cpu_fallback_ops"]
    first_time = not any("gcd" in k for k in vtpu.stats()["cpu_fallbacks"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = torch.gcd(x, x + 2)
    assert any("gcd" in str(w.message) for w in caught) == first_time  # warned once per op
    cpu = torch.arange(1, 7, dtype=torch.int32)
    assert torch.equal(got.cpu(), torch.gcd(cpu, cpu + 2))
    assert vtpu.stats()["cpu_fallback_ops"] > before
    assert any("gcd" in k for k in vtpu.stats()["cpu_fallbacks"])


@pytest.mark.parametrize("fallback", [False, True])
def test_sparse_tensors_are_refused_with_a_message_that_does_not_offer_the_fallback(fallback):
    vtpu.set_cpu_fallback(fallback)  # with or without it: the fallback cannot make a sparse tpu tensor
    message = r"sparse tensors are not supported on tpu \(.*\); keep them on the CPU, or make them dense first"
    for make in (lambda: torch.randn(3).to_sparse().to("tpu"), lambda: torch.randn(2, 3).to("tpu").to_sparse(),
                 lambda: torch.sparse_coo_tensor(torch.tensor([[0, 1]]), torch.tensor([1.0, 2.0]), (3,), device="tpu")):
        with pytest.raises(NotImplementedError, match=message):
            make()
    x = torch.randn(3)
    assert torch.equal(x.to_sparse().to_dense().to("tpu").cpu(), x)  # made dense first, it moves


def test_int64_math_is_not_silently_wrong():
    x = torch.arange(5).to("tpu")  # int64: add/sub/compare run on int32 words (docs/bridge.md)
    assert (x + 1).cpu().tolist() == [1, 2, 3, 4, 5]
    assert (x * 3).cpu().tolist() == [0, 3, 6, 9, 12]  # small known magnitudes: int32 words too
    big = torch.tensor([2**40, 2**62 + 5]).to("tpu")  # past int32: the words' exact product, wrapping as torch's
    assert torch.equal((big * 3).cpu(), torch.tensor([2**40, 2**62 + 5]) * 3)


def test_fallback_warning_points_at_the_users_line_without_a_cpp_suffix(run_isolated):
    # a fresh process: the warning is once per op and process
    proc = run_isolated("""
        import warnings, torch, vtpu
        vtpu.set_cpu_fallback(True)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.linalg.eigvals(torch.eye(3).to("tpu"))  # the user's line
        (w,) = [w for w in caught if "runs on the CPU" in str(w.message)]
        print(w.filename, "|", w.message)
    """)
    assert proc.returncode == 0, proc.stderr
    filename, message = proc.stdout.strip().split(" | ")
    assert filename == "<string>"  # the snippet's own line, not a C++ file
    assert "aten::_linalg_eigvals runs on the CPU" in message and "Triggered internally" not in message


def test_randint_and_random_are_made_on_the_chip(native_in_each_eager_mode):
    """torch.randint / Tensor.random_(from, to) for int64, int32 and f32 run as the Philox kernel:
    values in range, every value about equally likely (chi-square), seeds reproducible, and the
    int64 result's known bound keeps later int64 arithmetic on the chip."""
    torch.tpu.manual_seed(11)
    before = vtpu.stats()["kernels_launched"]
    a = torch.randint(0, 10, (100000,), device="tpu")
    assert a.dtype == torch.int64
    counts = torch.bincount(a.cpu(), minlength=10).double()
    assert counts.sum() == 100000 and len(counts) == 10  # nothing outside [0, 10)
    chi2 = ((counts - 10000) ** 2 / 10000).sum().item()
    assert chi2 < 27.9  # the 0.1% critical value of chi-square with 9 degrees of freedom
    b = torch.randint(-5, 5, (40, 50), device="tpu", dtype=torch.int32).cpu()
    assert b.dtype == torch.int32 and b.min() == -5 and b.max() == 4
    f = torch.empty(3000, device="tpu").random_(7).cpu()  # random_(to): [0, to)
    assert set(f.unique().tolist()) == set(range(7))
    torch.tpu.manual_seed(3)
    first = torch.randint(0, 1000, (64,), device="tpu").cpu()
    torch.tpu.manual_seed(3)
    assert torch.equal(torch.randint(0, 1000, (64,), device="tpu").cpu(), first)
    shifted = (torch.randint(100, 200, (1000,), device="tpu") + 1).cpu()  # int64 add, on the chip
    assert shifted.min() >= 101 and shifted.max() <= 200
    assert vtpu.stats()["kernels_launched"] > before


def test_zero_dim_inputs_of_arg_reductions_and_index_select(no_fallback):
    """0-d inputs (OpInfo's first samples) run on the chip as one-element rows, with torch's
    shapes and its IndexError for a dim a 0-d tensor lacks."""
    for value in (3.0, float("nan"), -float("inf")):
        x = torch.tensor(value)
        t = x.to("tpu")
        for got, want in ((t.argmax(), x.argmax()), (t.argmin(0, keepdim=True), x.argmin(0, keepdim=True)),
                          (torch.max(t, 0)[1], torch.max(x, 0)[1]), (torch.min(t, -1, True)[0], torch.min(x, -1, True)[0]),
                          (t.index_select(0, torch.tensor([0], device="tpu")), x.index_select(0, torch.tensor([0])))):
            assert got.shape == want.shape and got.dtype == want.dtype
            assert torch.equal(got.cpu(), want) or (want.isnan().all() and got.cpu().isnan().all())
    with pytest.raises(IndexError, match="Dimension out of range"):
        torch.tensor(1.0, device="tpu").argmax(2)
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def test_memory_queries_describe_the_simulated_hbm():
    """What trainers read (TorchTitan's memory monitor): the chip's name and HBM capacity, and
    torch.cuda-style statistics that follow a tensor's allocation."""
    vtpu.synchronize()
    props = torch.tpu.get_device_properties(0)
    assert props.name == torch.tpu.get_device_name() == f"vtpu {vtpu.chip_name()} (simulated TPU)"
    preset = next(p for p in vtpu._C.chip_presets() if p["name"] == vtpu.chip_name())
    assert props.total_memory == preset["hbm_bytes"] and props.tensor_cores == preset["tensor_cores"]
    before = torch.tpu.memory_stats()["allocated_bytes.all.current"]
    x = torch.ones(1 << 20, device="tpu")
    vtpu.synchronize()
    stats = torch.tpu.memory_stats()
    assert stats["allocated_bytes.all.current"] == before + 4 * (1 << 20) == torch.tpu.memory_reserved()
    assert stats["active_bytes.all.peak"] >= stats["allocated_bytes.all.current"]
    free, total = torch.tpu.mem_get_info()
    assert total == props.total_memory and free == total - stats["allocated_bytes.all.current"]
    torch.tpu.empty_cache()  # nothing cached to give back: the counts stay
    assert torch.tpu.memory_allocated() == stats["allocated_bytes.all.current"]
    del x
