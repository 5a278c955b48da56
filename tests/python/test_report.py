"""vtpu.report and vtpu.progress: per-kernel FLOPs and HBM bytes as the chip counted them, the
roofline and totals computed from them, the files a report writes, and progress of long flushes."""
import json
import os
import textwrap

import pytest
import torch

import vtpu
from vtpu import roofline

M, K, N = 512, 1024, 2048  # multiples of every preset's MXU, so executed FLOPs are the matmul's own


def _matmul_then_add():
    torch.manual_seed(0)
    a = torch.randn(M, K, dtype=torch.bfloat16).to("tpu")
    b = torch.randn(K, N, dtype=torch.bfloat16).to("tpu")
    y = torch.randn(M, N, dtype=torch.bfloat16).to("tpu")
    vtpu.synchronize()
    vtpu.reset_stats()
    c = a @ b
    d = (y * 2).exp()  # a second kernel with no MXU work (c is read later, so they do not fuse)
    vtpu.synchronize()
    return c, d, vtpu.stats()


def test_per_kernel_profile_counts_the_matmul_s_flops_and_bytes():
    c, _, stats = _matmul_then_add()
    mm = stats["per_kernel"]["mm"]
    assert mm["launches"] == 1
    assert mm["flops"] == 2 * M * K * N
    # At least its operands once and its result once; the blocking may read an operand again.
    assert mm["hbm_read_bytes"] >= 2 * (M * K + K * N)
    assert mm["hbm_write_bytes"] == 2 * M * N
    c = roofline.chip(vtpu.chip_name())
    clock_hz = next(p["clock_hz"] for p in vtpu._C.chip_presets() if p["name"] == c.name)
    assert mm["seconds"] == pytest.approx(mm["cycles"] / clock_hz)
    # No kernel beats the roofline: its FLOPs at the peak and its bytes at the peak bandwidth.
    assert mm["seconds"] >= max(mm["flops"] / c.peak_flops, (mm["hbm_read_bytes"] + mm["hbm_write_bytes"]) / c.peak_bandwidth)
    elementwise = [k for label, k in stats["per_kernel"].items() if label != "mm"]
    assert len(elementwise) == 1 and elementwise[0]["flops"] == 0
    assert elementwise[0]["hbm_read_bytes"] == elementwise[0]["hbm_write_bytes"] == 2 * M * N
    assert sum(k["seconds"] for k in stats["per_kernel"].values()) == pytest.approx(stats["simulated_seconds"])


def test_timing_only_profiles_kernels_as_a_full_run_does():
    _, _, full = _matmul_then_add()
    with vtpu.timing_only():
        _, _, timed = _matmul_then_add()
    # Every simulated count agrees; host_seconds is what simulating took this host, which differs.
    simulated = lambda stats: {k: {f: v for f, v in p.items() if f != "host_seconds"} for k, p in stats["per_kernel"].items()}  # noqa: E731
    assert simulated(timed) == simulated(full)
    assert all(p["host_seconds"] > 0 for p in full["per_kernel"].values())


def test_roofline_points_and_totals_follow_from_the_counts():
    _, _, stats = _matmul_then_add()
    c = roofline.chip(vtpu.chip_name())
    points, totals = roofline.kernels_and_totals(stats, c, model_flops=2 * M * K * N)
    assert [p.seconds for p in points] == sorted((p.seconds for p in points), reverse=True)
    mm = next(p for p in points if p.label == "mm")
    raw = stats["per_kernel"]["mm"]
    assert mm.intensity == pytest.approx(raw["flops"] / (raw["hbm_read_bytes"] + raw["hbm_write_bytes"]))
    assert mm.achieved_flops == pytest.approx(raw["flops"] / raw["seconds"])
    assert 0 < mm.roof_fraction(c) <= 1
    assert mm.bound(c) == ("compute" if mm.intensity >= c.peak_flops / c.peak_bandwidth else "memory")
    other = next(p for p in points if p.label != "mm")
    assert other.bound(c) == "memory" and other.intensity == 0
    assert 0 < other.roof_fraction(c) <= c.sustained_bandwidth / c.peak_bandwidth + 1e-9
    seconds = sum(k["seconds"] for k in stats["per_kernel"].values())
    assert totals.seconds == pytest.approx(seconds)
    assert totals.mfu == pytest.approx(2 * M * K * N / (c.peak_flops * seconds))
    assert totals.mxu_utilisation == pytest.approx(totals.mfu)  # no padding: executed = useful
    hbm = sum(k["hbm_read_bytes"] + k["hbm_write_bytes"] for k in stats["per_kernel"].values())
    assert totals.hbm_utilisation == pytest.approx(hbm / (c.peak_bandwidth * seconds))
    assert sum(p.share for p in points) == pytest.approx(1)


def test_profile_writes_the_report_the_roofline_and_the_trace(tmp_path):
    a = torch.randn(M, K, dtype=torch.bfloat16).to("tpu")
    b = torch.randn(K, N, dtype=torch.bfloat16).to("tpu")
    with vtpu.report.profile(tmp_path, model_flops=2 * M * K * N, show_progress=False) as profiled:
        c = (a @ b).relu()  # kept: a result nobody keeps never runs
    r = profiled.report
    assert [f.name for f in r.files] == ["report.md", "roofline.png", "trace.json"]
    assert (tmp_path / "roofline.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = (tmp_path / "report.md").read_text()
    assert f"| MFU (model FLOPs over the peak's) | {r.totals.mfu:.1%} |" in text
    assert "| `mm+relu` | 1 |" in text
    events = json.loads((tmp_path / "trace.json").read_text())["traceEvents"]
    assert any(e.get("name") == "mm+relu" for e in events)
    assert r.totals.launches == 1 and r.kernels[0].label == "mm+relu"
    torch.testing.assert_close(c.cpu().float(), (a.cpu().float() @ b.cpu().float()).relu(), rtol=2e-2, atol=1e-1)


def test_vtpu_report_is_callable_and_names_a_missing_model_flops(tmp_path):
    import vtpu.report  # noqa: F401  (importing the submodule must leave vtpu.report callable)

    _matmul_then_add()
    r = vtpu.report(tmp_path)
    assert r.totals.mfu is None
    assert "give the model's FLOPs" in (tmp_path / "report.md").read_text()
    with pytest.raises(ValueError, match="no chip preset named 'v9'"):
        vtpu.report(tmp_path, chip="v9")


def _long_flush():
    """40 chained matmuls in one flush: about a second of host time."""
    x = torch.randn(256, 1024, dtype=torch.bfloat16).to("tpu")
    w = torch.randn(1024, 1024, dtype=torch.bfloat16).to("tpu") / 32
    vtpu.synchronize()
    for _ in range(40):
        x = (x @ w).tanh()
    return x


@pytest.mark.skipif(vtpu.get_mode() != "defer_and_fuse", reason="one flush of many kernels")
def test_progress_reports_long_flushes_only():
    heard = []
    vtpu._C.set_progress_listener(lambda done, total: heard.append((done, total)))
    try:
        x = _long_flush()
        vtpu.synchronize()
        assert len(heard) >= 2 and heard[-1] == (40, 40)
        assert [d for d, _ in heard] == sorted(d for d, _ in heard)
        heard.clear()
        (x + 1).cpu()  # one short kernel: nothing to show
        assert heard == []
    finally:
        vtpu._C.set_progress_listener(None)


@pytest.mark.skipif(vtpu.get_mode() != "defer_and_fuse", reason="one flush of many kernels")
def test_ctrl_c_in_the_progress_bar_stops_the_flush_and_the_device_stays_usable():
    def interrupt(done, total):
        raise KeyboardInterrupt

    vtpu._C.set_progress_listener(interrupt)
    try:
        x = _long_flush()
        with pytest.raises(KeyboardInterrupt):
            vtpu.synchronize()
    finally:
        vtpu._C.set_progress_listener(None)
    with pytest.raises(RuntimeError, match="KeyboardInterrupt"):
        x.cpu()
    y = torch.ones(4, device="tpu") * 3
    assert y.cpu().tolist() == [3.0] * 4


def test_python_m_vtpu_report_runs_a_script(tmp_path, run_isolated):
    script = tmp_path / "step.py"
    script.write_text(textwrap.dedent("""
        import sys, torch
        n = int(sys.argv[1])
        a = torch.randn(n, n, dtype=torch.bfloat16, device="tpu")
        print("sum", float((a @ a).float().sum().isfinite()))
    """))
    out = run_isolated(f"""
        import sys, runpy
        sys.argv = ["vtpu.report", "-o", r"{tmp_path / 'out'}", "--model-flops", "{2 * 256 ** 3}", "--no-trace",
                    r"{script}", "256"]
        runpy.run_module("vtpu.report", run_name="__main__")
    """)
    assert out.returncode == 0, out.stderr
    assert "sum 1.0" in out.stdout
    summary = out.stdout.strip().splitlines()[-1]
    assert summary.startswith(f"{os.environ.get('VTPU_CHIP', 'v5e')}: ") and "MFU" in summary and "- (pass" not in summary
    assert (tmp_path / "out" / "report.md").exists() and (tmp_path / "out" / "roofline.png").exists()
    assert not (tmp_path / "out" / "trace.json").exists()


@pytest.mark.skipif(vtpu.get_mode() != "defer_and_fuse", reason="one flush of many kernels")
def test_vtpu_progress_draws_a_bar_for_a_long_flush():
    import io

    pytest.importorskip("tqdm")
    stream = io.StringIO()
    with vtpu.progress(stream=stream):
        _long_flush().cpu()
        drawn = stream.getvalue()
        (torch.ones(4, device="tpu") + 1).cpu()
        assert stream.getvalue() == drawn  # a short flush draws nothing
    assert "tpu kernels" in drawn and "/40" in drawn
    x = _long_flush()  # outside the block: no listener
    stream.truncate(0)
    x.cpu()
    assert stream.getvalue() == ""
