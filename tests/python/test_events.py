"""tpu events and streams as CUDA code uses them: Event.elapsed_time is the simulated time between
two recorded points (equal to what vtpu.stats() counts), in every mode; the one stream per device
answers torch.tpu and torch.accelerator's stream calls."""
import pytest
import torch

import vtpu


pytestmark = pytest.mark.usefixtures("each_eager_mode")


def test_elapsed_time_is_the_simulated_time_of_the_work_between():
    a, b = torch.randn(512, 512, device="tpu"), torch.randn(512, 512, device="tpu")
    vtpu.synchronize()
    vtpu.reset_stats()  # the events' clock is not reset: it only moves forward
    start, end = torch.tpu.Event(enable_timing=True), torch.tpu.Event(enable_timing=True)
    start.record()
    c = (a @ b).relu()
    end.record()  # a sync point: the pending matmul runs first
    end.synchronize()
    simulated_ms = vtpu.stats()["simulated_seconds"] * 1e3
    assert simulated_ms > 0
    assert start.elapsed_time(end) == pytest.approx(simulated_ms, rel=1e-9)
    nothing = torch.tpu.Event(enable_timing=True)
    nothing.record()
    assert end.elapsed_time(nothing) == 0.0  # no work in between
    assert c.shape == (512, 512)


def test_elapsed_time_needs_both_events_recorded():
    start, end = torch.tpu.Event(enable_timing=True), torch.tpu.Event(enable_timing=True)
    start.record()
    with pytest.raises(ValueError, match="Both events must be recorded"):  # torch checks first, as for CUDA
        start.elapsed_time(end)


def test_streams_are_the_devices_one_stream():
    stream = torch.tpu.current_stream()
    assert stream.device == torch.device("tpu", 0)
    assert torch.accelerator.current_stream() == stream == torch.tpu.default_stream()
    x = torch.ones(4, device="tpu") * 3
    stream.synchronize()
    assert stream.query() and torch.equal(x.cpu(), torch.full((4,), 3.0))
