"""vtpu.run_assembly: a kernel in vtpu assembly run on tpu tensors, its arguments bound in `.arg`
order, its time counted like any kernel's, and every misuse refused with a message that says
what to pass."""
import pathlib

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

import vtpu

VECTOR_ADD = (pathlib.Path(__file__).parents[2] / "examples" / "vector_add.s").read_text()


@pytest.mark.usefixtures("each_eager_mode")
@pytest.mark.parametrize("n", [1, 1000, 3000])
def test_vector_add_matches_the_cpu(n):
    a, b = torch.randn(n), torch.randn(n)
    c = torch.empty(n, device="tpu")
    result = vtpu.run_assembly(VECTOR_ADD, a.to("tpu"), b.to("tpu"), c, n)
    assert torch.equal(c.cpu(), a + b)
    assert result["name"] == "vector_add" and result["cycles"] > 0
    assert result["hbm_read_bytes"] == 8 * n and result["hbm_write_bytes"] == 4 * n


def test_it_reads_pending_results_and_counts_its_time():
    x = torch.arange(2048.0, device="tpu")
    doubled = x * 2  # deferred: the kernel must see it computed
    out = torch.empty(2048, device="tpu")
    vtpu.synchronize()
    vtpu.reset_stats()
    clock = torch.tpu.Event(enable_timing=True)
    clock.record()
    result = vtpu.run_assembly(VECTOR_ADD, doubled, x, out, 2048)
    done = torch.tpu.Event(enable_timing=True)
    done.record()
    assert torch.equal(out.cpu(), torch.arange(2048.0) * 3)
    stats = vtpu.stats()
    profile = stats["per_kernel"]["vector_add"]
    assert (profile["launches"], profile["cycles"], profile["flops"]) == (1, result["cycles"], 0)
    assert stats["simulated_seconds"] == pytest.approx(result["seconds"], rel=1e-12)
    assert clock.elapsed_time(done) == pytest.approx(result["seconds"] * 1e3, rel=1e-9)


def test_the_profiler_sees_it():
    a = torch.ones(1024, device="tpu")
    c = torch.empty(1024, device="tpu")
    vtpu.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        result = vtpu.run_assembly(VECTOR_ADD, a, a, c, 1024)
    kernels = [e for e in prof.events() if e.name == "vector_add"]
    assert len(kernels) == 1 and kernels[0].device_time_total == pytest.approx(result["seconds"] * 1e6, abs=1e-3)


def test_defines_set_assembler_symbols():
    source = VECTOR_ADD.replace(".set TILE, 1024", ".default TILE, 4096")  # a symbol -D may override
    a = torch.randn(2000, device="tpu")
    c = torch.empty(2000, device="tpu")
    vtpu.run_assembly(source, a, a, c, 2000, defines={"TILE": 1024})
    assert torch.equal(c.cpu(), a.cpu() * 2)


def test_misuse_is_refused_with_what_to_pass():
    a = torch.ones(8, device="tpu")
    with pytest.raises(ValueError, match="declares 4 arguments \\(.arg\\), was given 3"):
        vtpu.run_assembly(VECTOR_ADD, a, a, a)
    with pytest.raises(TypeError, match="argument 3 \\('n'\\) is a scalar: pass an int"):
        vtpu.run_assembly(VECTOR_ADD, a, a, a, a)
    with pytest.raises(TypeError, match="argument 0 \\('a'\\) is a buffer: pass a tpu tensor"):
        vtpu.run_assembly(VECTOR_ADD, 1, a, a, 8)
    with pytest.raises(RuntimeError, match="argument 'a' is on cpu; kernels read tpu tensors"):
        vtpu.run_assembly(VECTOR_ADD, torch.ones(8), a, a, 8)
    strided = torch.ones(8, 2, device="tpu")[:, 0]
    with pytest.raises(RuntimeError, match="argument 'b' is not contiguous .*pass .contiguous\\(\\)"):
        vtpu.run_assembly(VECTOR_ADD, a, strided, a, 8)
    with pytest.raises(ValueError, match="does not fit the chip's 32-bit scalar registers"):
        vtpu.run_assembly(VECTOR_ADD, a, a, a, 2**40)
    with pytest.raises(ValueError, match="the kernel does not assemble: 2:14: expected ',' before operand 3 of vadd"):
        vtpu.run_assembly(".name broken\n  vadd v1, v2\n  halt\n")


def test_autograd_sees_the_kernel_write_its_buffers():
    w = torch.ones(1024, device="tpu", requires_grad=True)
    saved = torch.ones(1024, device="tpu")
    loss = (w * saved).sum()  # saved is kept for w's gradient
    vtpu.run_assembly(VECTOR_ADD, saved, saved, saved, 1024)  # saved = saved + saved, in place
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()
