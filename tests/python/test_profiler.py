"""torch.profiler sees the chip: with ProfilerActivity.PrivateUse1 (ProfilerActivity.TPU here),
every kernel appears as a tpu kernel lasting its simulated time, linked to the aten op that ran
it, in the profiler's table and in its exported trace."""
import json

import pytest
import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

import vtpu

CHIP = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]


def _profiled(activities, fn):
    vtpu.synchronize()
    vtpu.reset_stats()
    with profile(activities=activities) as prof:
        fn()
        vtpu.synchronize()
    return prof


def _kernels(prof):
    return [e for e in prof.events() if e.device_type == DeviceType.PrivateUse1]


def _matmul_relu_sum():
    x = torch.randn(256, 256, device="tpu")
    vtpu.synchronize()
    return lambda: (x @ x).relu().sum().item()


def test_the_activity_is_offered_under_the_devices_name():
    assert ProfilerActivity.PrivateUse1 in torch.profiler.supported_activities()
    assert ProfilerActivity.PrivateUse1.name == "TPU"


@pytest.mark.usefixtures("each_eager_mode")
def test_kernels_last_their_simulated_time():
    prof = _profiled(CHIP, _matmul_relu_sum())
    kernels = _kernels(prof)
    per_kernel = vtpu.stats()["per_kernel"]
    assert sorted({k.name for k in kernels}) == sorted(per_kernel)
    assert len(kernels) == sum(p["launches"] for p in per_kernel.values())
    # Kineto keeps whole nanoseconds: each kernel is within half of one of the simulated time
    total_us = sum(k.device_time_total for k in kernels)
    assert total_us == pytest.approx(vtpu.stats()["simulated_seconds"] * 1e6, abs=1e-3 * len(kernels))
    table = prof.key_averages().table(sort_by="self_device_time_total")
    assert "Self TPU" in table and all(name in table for name in per_kernel)


def test_in_strict_eager_each_aten_op_owns_its_kernel():
    vtpu.set_mode("strict_eager")
    try:
        prof = _profiled(CHIP, _matmul_relu_sum())
    finally:
        vtpu.set_mode("defer_and_fuse")
    by_name = {e.key: e for e in prof.key_averages()}
    for op, kernel in (("aten::mm", "mm"), ("aten::relu", "relu"), ("aten::sum", "sum")):
        assert by_name[kernel].self_device_time_total > 0
        assert by_name[op].self_device_time_total == pytest.approx(by_name[kernel].self_device_time_total)


def test_deferred_kernels_belong_to_the_op_that_synchronised():
    prof = _profiled(CHIP, _matmul_relu_sum())
    fused = [k for k in _kernels(prof) if k.name == "mm+relu"]
    assert len(fused) == 1
    owners = [e for e in prof.events() if e.device_type == DeviceType.CPU and e.kernels]
    assert [e.name for e in owners] == ["aten::_local_scalar_dense"]  # .item() ran the flush


def test_exported_trace_has_a_row_of_chip_kernels(tmp_path):
    prof = _profiled(CHIP, _matmul_relu_sum())
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    assert [k["name"] for k in kernels] == ["mm+relu", "sum"]
    first, second = kernels
    # back to back on the chip's row, and the simulated clock in the metadata agrees
    assert second["ts"] == pytest.approx(first["ts"] + first["dur"], abs=1e-3)
    assert float(second["args"]["simulated start us"]) == pytest.approx(
        float(first["args"]["simulated start us"]) + first["dur"], abs=1e-3)
    assert {k["pid"] for k in kernels} == {0}
    assert any(e.get("ph") == "M" and e["args"].get("labels") == "tpu (simulated)" for e in events)


def test_a_cpu_only_profile_records_no_chip_kernels():
    prof = _profiled([ProfilerActivity.CPU], _matmul_relu_sum())
    assert _kernels(prof) == [] and vtpu.stats()["kernels_launched"] > 0
