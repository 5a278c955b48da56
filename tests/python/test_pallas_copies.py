"""vtpu.pallas manual copies (Pallas's memory_space=pl.ANY and make_async_copy with DMA
semaphores) against CPU references, and the races, deadlocks and windows the chip refuses."""
import contextlib

import pytest
import torch

import vtpu
from vtpu import pallas as pl


@contextlib.contextmanager
def strict_eager():
    vtpu.set_mode("strict_eager")
    try:
        yield
    finally:
        vtpu.set_mode("defer_and_fuse")


def manual_copy_kernel(x_hbm, o_hbm, a, b, sem_in, sem_out):
    """Two halves of a 16-row slab per step: the second half's copy in flies while the first
    half computes, the first half's copy out while the second computes."""
    i = pl.program_id(0)
    first = pl.async_copy(x_hbm.at[pl.ds(i * 16, 8), :], a, sem_in)
    second = pl.async_copy(x_hbm.at[pl.ds(i * 16 + 8, 8), :], b, sem_in)
    first.wait()
    a[...] = a[...] * 2 + 1
    out_first = pl.async_copy(a, o_hbm.at[pl.ds(i * 16, 8), :], sem_out)
    second.wait()
    b[...] = b[...] * 2 + 1
    out_second = pl.async_copy(b, o_hbm.at[pl.ds(i * 16 + 8, 8), :], sem_out)
    out_first.wait()
    out_second.wait()


def manual_call(kernel, rows=64):
    hbm = pl.BlockSpec(memory_space=pl.ANY)
    return pl.pallas_call(kernel, out_shape=pl.ShapeDtype((rows, 256)), grid=(rows // 16,), in_specs=[hbm],
                          out_specs=hbm, scratch_shapes=[pl.VMEM((8, 256)), pl.VMEM((8, 256)), pl.SemaphoreType.DMA,
                                                         pl.SemaphoreType.DMA])


def test_manual_async_copies_with_semaphores():
    x = torch.randn(64, 256)
    torch.testing.assert_close(manual_call(manual_copy_kernel)(x.to("tpu")).cpu(), x * 2 + 1, rtol=0, atol=0)


def test_reading_a_buffer_before_its_copy_is_waited_for_is_a_race():
    def racy(x_hbm, o_hbm, a, b, sem_in, sem_out):
        i = pl.program_id(0)
        copy = pl.async_copy(x_hbm.at[pl.ds(i * 16, 8), :], a, sem_in)
        b[...] = a[...] * 2
        copy.wait()
        pl.async_copy(b, o_hbm.at[pl.ds(i * 16, 8), :], sem_out).wait()

    # Run at once (strict_eager, debug): the error names the body's line and the grid index.
    with strict_eager(), pytest.raises(RuntimeError) as info:
        manual_call(racy)(torch.zeros(64, 256, device="tpu"))
    assert "races the DMA" in str(info.value)
    assert f"kernel 'racy', in the body's statement at {__file__}:" in str(info.value)
    assert "at grid index (0,)" in str(info.value)
    # Deferred (defer_and_fuse): the same race, reported when the graph holding the kernel runs,
    # naming the same line and grid index.
    with pytest.raises(RuntimeError) as info:
        manual_call(racy)(torch.zeros(64, 256, device="tpu").sin()).cpu()
    assert "a kernel failed on the chip" in str(info.value) and "races the DMA" in str(info.value)
    assert f"kernel 'racy', in the body's statement at {__file__}:" in str(info.value)
    assert "at grid index (0,)" in str(info.value)


def test_waiting_for_a_copy_never_started_is_a_deadlock():
    def forgets_to_start(x_hbm, o_hbm, a, b, sem_in, sem_out):
        pl.make_async_copy(x_hbm.at[pl.ds(0, 8), :], a, sem_in).wait()

    with strict_eager(), pytest.raises(RuntimeError) as info:
        manual_call(forgets_to_start)(torch.zeros(64, 256, device="tpu"))
    assert "deadlock" in str(info.value)
    assert f"kernel 'forgets_to_start', in the body's statement at {__file__}:" in str(info.value)


def test_copy_window_out_of_bounds_names_the_grid_index():
    def overreads(x_hbm, o_hbm, a, b, sem_in, sem_out):
        pl.async_copy(x_hbm.at[pl.ds(pl.program_id(0) * 16 + 9, 8), :], a, sem_in).wait()

    with pytest.raises(ValueError) as info:
        manual_call(overreads)(torch.zeros(64, 256, device="tpu"))
    assert "the copy's source at grid index (3,) is rows [57, 65), columns [0, 256) of a 64 x 256 ref" in str(info.value)
