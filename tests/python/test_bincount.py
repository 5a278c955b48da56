"""torch.bincount on the chip (vtpu/bincount.py): counts and f32 weight sums against the CPU with
the fallback off, minlength, empty and int32 inputs, torch's error for negative values; weights
the chip would sum in the wrong precision, and values too large to count exactly, fall back."""
import pytest
import torch

import vtpu

VALUES = torch.tensor([0, 1, 1, 3, 7, 1, 7, 2])


@pytest.mark.usefixtures("native_in_each_eager_mode")
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("minlength", [0, 12])
def test_matches_the_cpu(weighted, minlength):
    weights = torch.rand(len(VALUES), generator=torch.Generator().manual_seed(0)) if weighted else None
    want = torch.bincount(VALUES, weights, minlength)
    got = torch.bincount(VALUES.to("tpu"), None if weights is None else weights.to("tpu"), minlength)
    assert got.dtype == want.dtype
    torch.testing.assert_close(got.cpu(), want)


@pytest.mark.usefixtures("native_in_each_eager_mode")
def test_empty_and_int32_inputs():
    empty = torch.tensor([], dtype=torch.long)
    assert torch.equal(torch.bincount(empty.to("tpu"), minlength=3).cpu(), torch.bincount(empty, minlength=3))
    small = torch.tensor([2, 2, 0], dtype=torch.int32)
    assert torch.equal(torch.bincount(small.to("tpu")).cpu(), torch.bincount(small))


def test_negative_values_raise_torchs_error(no_fallback):
    with pytest.raises(RuntimeError, match="bincount only supports 1-d non-negative integral inputs"):
        torch.bincount(torch.tensor([-1, 2], device="tpu"))


def test_what_the_chip_cannot_count_exactly_falls_back_named(cpu_fallback):
    vtpu.reset_stats()
    big = torch.tensor([2 ** 24 + 1, 3])
    with pytest.warns(UserWarning, match=r"aten::bincount runs on the CPU \(values of 2\^24 or more\)"):
        got = torch.bincount(big.to("tpu"))
    assert got.shape == (2 ** 24 + 2,) and got[2 ** 24 + 1].item() == 1
    doubles = torch.rand(len(VALUES), dtype=torch.float64)
    torch.testing.assert_close(torch.bincount(VALUES.to("tpu"), doubles.to("tpu")).cpu(), torch.bincount(VALUES, doubles))
    assert vtpu.stats()["cpu_fallbacks"] == {"aten::bincount": 2}
