"""A vtpu.pallas kernel failing on the chip names the body's line and the grid step, whether it
ran at once (strict_eager) or as a node of the pending graph at a flush (defer_and_fuse)."""
import pytest
import torch

from vtpu import pallas as pl


def test_a_deadlock_at_a_later_step_of_a_2d_grid_names_that_step(each_eager_mode):
    def waits_once(x_hbm, o_hbm, a, sem):
        @pl.when(pl.program_id(1) == 2)
        def _():
            pl.make_async_copy(x_hbm.at[pl.ds(0, 8), :], a, sem).wait()  # never started

    hbm = pl.BlockSpec(memory_space=pl.ANY)
    f = pl.pallas_call(waits_once, out_shape=pl.ShapeDtype((64, 256)), grid=(2, 4), in_specs=[hbm], out_specs=hbm,
                       scratch_shapes=[pl.VMEM((8, 256)), pl.SemaphoreType.DMA])
    with pytest.raises(RuntimeError) as info:
        f(torch.zeros(64, 256, device="tpu").exp()).cpu()
    message = str(info.value)
    assert "deadlock" in message
    assert f"kernel 'waits_once', in the body's statement at {__file__}:13, at grid index (0, 2)" in message
