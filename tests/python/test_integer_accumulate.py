"""Integer scatter_add and index_put(accumulate=True) on the chip, exact
(torch_bridge/csrc/aten/integer_accumulate.cc): int32 at any value through byte planes (wrapping
as the CPU's), int8 and uint8 wrapping to their byte, int64 of known magnitude, against the CPU."""
import pytest
import torch

import vtpu


def ints(shape, low, high, dtype, seed):
    return torch.randint(low, high, shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


CASES = [(torch.int32, -(2**31), 2**31 - 1), (torch.int32, -9, 10), (torch.int64, -1000, 1000), (torch.uint8, 0, 256),
         (torch.int8, -128, 128)]


@pytest.mark.parametrize("mode", ["strict_eager", "defer_and_fuse"])
@pytest.mark.parametrize("dtype,low,high", CASES)
def test_scatter_add_and_index_put_accumulate(mode, dtype, low, high, no_fallback):
    vtpu.set_mode(mode)
    self, src = ints((4, 5), low, high, dtype, 1), ints((30, 5), low, high, dtype, 2)
    index = ints((30, 5), 0, 4, torch.int64, 3)  # repeated targets: sums of several elements
    got = self.to("tpu").scatter_add(0, index.to("tpu"), src.to("tpu")).cpu()
    assert got.dtype == dtype and torch.equal(got, self.scatter_add(0, index, src))
    rows = index[:, 0]
    got = self.to("tpu").index_put((rows.to("tpu"),), src.to("tpu"), accumulate=True).cpu()
    assert torch.equal(got, self.index_put((rows,), src, accumulate=True))
    counts = torch.zeros(4, dtype=dtype).to("tpu").index_put_((rows.to("tpu"),), torch.tensor(1, dtype=dtype), accumulate=True)
    assert torch.equal(counts.cpu(), torch.zeros(4, dtype=dtype).index_put_((rows,), torch.tensor(1, dtype=dtype), accumulate=True))
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def test_int64_sums_past_int32_stay_on_the_cpu_named(no_fallback):
    self, src = torch.zeros(3, dtype=torch.int64), torch.full((4,), 2**30)
    with pytest.raises(NotImplementedError, match="scatter_add"):
        self.to("tpu").scatter_add(0, torch.tensor([0, 0, 1, 2]).to("tpu"), src.to("tpu"))
    with pytest.raises(NotImplementedError, match="integer sums not known to stay exact"):
        self.to("tpu").index_put_((torch.tensor([0, 0, 1, 2]).to("tpu"),), src.to("tpu"), accumulate=True)
