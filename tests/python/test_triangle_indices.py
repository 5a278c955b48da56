"""torch.triu_indices and torch.tril_indices made on the chip (vtpu/triangle_indices.py) against
the CPU's: square, wide and tall shapes, offsets inside and past either side, empty results,
int32, in both eager modes with no CPU op and, in defer_and_fuse, no synchronisation."""
import pytest
import torch

import vtpu

pytestmark = pytest.mark.usefixtures("native_in_each_eager_mode")

CASES = [(5, 5, 0), (5, 5, 1), (4, 7, 2), (7, 4, -2), (300, 200, -3), (3, 3, 10), (3, 3, -10), (1, 1, 1), (0, 4, 0)]


@pytest.mark.parametrize("op", [torch.triu_indices, torch.tril_indices], ids=["triu", "tril"])
@pytest.mark.parametrize("case", CASES, ids=[str(c) for c in CASES])
def test_matches_the_cpu(op, case):
    got = op(*case, device="tpu")
    assert got.device.type == "tpu"
    assert torch.equal(got.cpu(), op(*case))


@pytest.mark.parametrize("op", [torch.triu_indices, torch.tril_indices], ids=["triu", "tril"])
def test_int32_and_no_synchronisation(op, each_eager_mode):
    before = vtpu.stats()["device_to_host_bytes"]
    got = op(6, 9, 1, dtype=torch.int32, device="tpu")
    assert vtpu.stats()["device_to_host_bytes"] == before
    assert got.dtype == torch.int32 and torch.equal(got.cpu(), op(6, 9, 1, dtype=torch.int32))
