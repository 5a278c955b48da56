"""Replication padding's gradient on the chip (vtpu/replication_pad.py): 1-D, 2-D and 3-D, uneven
pads, batched and unbatched, against the CPU with the fallback off."""
import pytest
import torch
from cpu_comparison import assert_matches_cpu

pytestmark = pytest.mark.usefixtures("native_in_each_eager_mode")

CASES = [
    (torch.nn.ReplicationPad1d((2, 3)), (2, 3, 5)),
    (torch.nn.ReplicationPad1d(4), (3, 2)),  # wider than the input, unbatched
    (torch.nn.ReplicationPad2d((1, 2, 3, 0)), (2, 3, 4, 5)),
    (torch.nn.ReplicationPad3d((1, 2, 0, 1, 2, 2)), (2, 3, 4, 5, 3)),
]


@pytest.mark.parametrize("module, shape", CASES, ids=[f"{type(m).__name__}{s}" for m, s in CASES])
def test_output_and_gradient_match_the_cpu(module, shape):
    assert_matches_cpu(module, torch.randn(shape, generator=torch.Generator().manual_seed(0)))
