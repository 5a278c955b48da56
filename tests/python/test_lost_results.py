"""Results a failed flush was to write (a kernel that trapped, out of HBM, an interrupt) are lost:
reading one raises, naming why, instead of returning whatever its buffer held; writing a whole new
value makes it readable again, and the device stays usable (docs/faults.md)."""
import pytest
import torch

import vtpu


def test_reading_a_lost_result_raises_until_it_is_written_again(no_fallback):
    vtpu.set_mode("defer_and_fuse")
    table = torch.arange(12.0).view(4, 3).to("tpu")
    y = table[torch.tensor([1, 9]).to("tpu")] * 2  # row 9 is outside the table: the gather traps at the flush
    z = y + 1
    with pytest.raises(IndexError, match="index out of range"):
        z.cpu()
    for lost in (y, z):
        with pytest.raises(RuntimeError, match="value was lost: a kernel of its flush failed"):
            lost.cpu()
    with pytest.raises(RuntimeError, match="value was lost"):
        (y * 3).cpu()  # an op reading it
    y.copy_(torch.ones(2, 3))  # a whole new value
    assert torch.equal((y + 1).cpu(), torch.full((2, 3), 2.0))
    assert torch.equal((table * 2).cpu(), torch.arange(12.0).view(4, 3) * 2)  # the device is usable
