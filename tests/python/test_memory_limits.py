"""Simulated HBM running out: torch.OutOfMemoryError with sizes at the op that asked where it can
be known then, before a flush runs otherwise, and the device usable afterwards."""
import pytest


def test_out_of_memory_raises_torch_oom_and_the_process_recovers(run_isolated):
    result = run_isolated("""
        import torch, vtpu
        vtpu.set_mode("strict_eager")
        small = torch.ones(1024, device="tpu")
        try:
            torch.empty(8 * 1024 * 1024, device="tpu")  # 32 MiB > 16 MiB of HBM
        except torch.OutOfMemoryError as e:
            print("OOM:", e)
        print("after:", (small * 2).sum(-1).item())
    """, VTPU_HBM_BYTES=16 * 1024 * 1024)
    assert result.returncode == 0, result.stderr
    assert "OOM: vtpu: out of HBM on tpu:0" in result.stdout and "16777216 total" in result.stdout
    assert "after: 2048.0" in result.stdout


@pytest.mark.parametrize("mode", ["defer_and_fuse", "strict_eager"])
def test_a_tensor_larger_than_hbm_is_refused_when_the_op_asks_in_every_mode(run_isolated, mode):
    # defer_and_fuse gave it a buffer and failed only at the flush ("could not lower the pending
    # ops: kernel full ..."), where no op can be named.
    result = run_isolated("""
        import torch, vtpu
        try:
            torch.empty(8 * 1024 * 1024, device="tpu")  # 32 MiB > 16 MiB of HBM
        except torch.OutOfMemoryError as e:
            print("OOM:", e)
        a = torch.ones(3 * 1024 * 1024, device="tpu")  # 12 MiB
        try:
            b = torch.ones(3 * 1024 * 1024, device="tpu") + a
            b.cpu()
        except torch.OutOfMemoryError as e:
            print("OOM2:", e)
        print("after:", (a[:4] * 2).sum().item())
    """, VTPU_HBM_BYTES=16 * 1024 * 1024, VTPU_MODE=mode)
    assert result.returncode == 0, result.stderr
    assert "OOM: vtpu: out of HBM on tpu:0 (v5e): tried to allocate 33554432 bytes, more than all of its HBM: 16777216 total" in result.stdout
    assert "OOM2: vtpu: out of HBM on tpu:0" in result.stdout and "bytes free of 16777216 total" in result.stdout
    assert "after: 8.0" in result.stdout


@pytest.mark.parametrize("mode", ["defer_and_fuse", "strict_eager"])
def test_tensors_that_fit_alone_but_not_together_are_refused_at_the_op(run_isolated, mode):
    # defer_and_fuse used to accept the second and fail at the flush ("pending results are lost")
    result = run_isolated("""
        import torch, vtpu
        a = torch.ones(3 * 1024 * 1024, device="tpu")  # 12 MiB of 16, pending in defer_and_fuse
        flushes = vtpu.stats()["flushes"]
        try:
            b = torch.ones(3 * 1024 * 1024, device="tpu")
        except torch.OutOfMemoryError as e:
            print("OOM:", e)
        print("no flush:", vtpu.stats()["flushes"] == flushes)
        print("a:", a[:3].sum().item())
        del a  # its bytes are free again
        b = torch.full((3 * 1024 * 1024,), 2.0, device="tpu")  # (ones * 2 would hold two at once, as on CUDA)
        print("b:", b[:3].sum().item())
    """, VTPU_HBM_BYTES=16 * 1024 * 1024, VTPU_MODE=mode)
    assert result.returncode == 0, result.stderr
    assert ("OOM: vtpu: out of HBM on tpu:0 (v5e): tried to allocate 12582912 bytes; 4194304 bytes free of 16777216 "
            "total (live tensors hold 12582912)") in result.stdout
    assert "no flush: True" in result.stdout and "a: 3.0" in result.stdout and "b: 6.0" in result.stdout


def test_a_flush_that_cannot_fit_is_refused_before_it_runs_and_kept(run_isolated):
    # Every tensor fits when it is made (they are counted then: 15 MiB of 16 at most). The flush
    # needs more: a.add_(1) gives a's new value fresh HBM while the pending b = a * 2 still reads
    # the old one, so the run holds 19 MiB at its end. It used to run until a result found no
    # HBM, losing the flush's results; now it is refused whole before any kernel runs, and kept.
    result = run_isolated("""
        import torch, vtpu
        mib = 1024 * 1024 // 4
        a = torch.ones(4 * mib, device="tpu")
        c = torch.ones(3 * mib, device="tpu")
        a[:1].cpu(), c[:1].cpu()  # both in HBM
        b = a * 2
        a.add_(1)
        d = torch.full((4 * mib,), 3.0, device="tpu")
        launched = vtpu.stats()["kernels_launched"]
        for attempt in range(2):  # refused again while nothing was freed, the same way
            try:
                b[:1].cpu()
            except torch.OutOfMemoryError as e:
                print("OOM:", e)
        print("nothing ran:", vtpu.stats()["kernels_launched"] == launched)
        del c
        print("b:", torch.equal(b.cpu(), torch.full((4 * mib,), 2.0)), "a:", torch.equal(a.cpu(), torch.full((4 * mib,), 2.0)),
              "d:", torch.equal(d.cpu(), torch.full((4 * mib,), 3.0)))
    """, VTPU_HBM_BYTES=16 * 1024 * 1024, VTPU_MODE="defer_and_fuse")
    assert result.returncode == 0, result.stderr
    oom = [line for line in result.stdout.splitlines() if line.startswith("OOM:")]
    assert len(oom) == 2 and oom[0] == oom[1], result.stdout
    assert "OOM: vtpu: out of HBM on tpu:0 (v5e): the pending ops need at least 19922944 bytes of HBM at their peak" in oom[0]
    assert "more than its 16777216 total" in oom[0]
    assert "Nothing ran and the pending ops are kept: free tensors, then read the results again" in oom[0]
    assert "nothing ran: True" in result.stdout
    assert "b: True a: True d: True" in result.stdout
