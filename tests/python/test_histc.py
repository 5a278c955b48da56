"""torch.histc on the chip (torch_bridge/csrc/aten/histc.cc) against the CPU's kernel with the
fallback off: values on the edges, at bin boundaries, outside the range and NaN, several bin
counts, integer inputs (counted as f32, result in their dtype, as accelerators give it), the
mixture-of-experts count of expert ids, both modes; a data-derived range is counted on the host."""
import warnings

import pytest
import torch

import vtpu


@pytest.fixture(autouse=True)
def chip(no_fallback):
    yield


@pytest.mark.parametrize("mode", ["strict_eager", "defer_and_fuse"])
@pytest.mark.parametrize("bins,lo,hi", [(4, 0.0, 3.0), (10, -1.0, 1.0), (7, -2.5, 0.3), (1, 0.0, 1.0)])
def test_histc_matches_the_cpu(mode, bins, lo, hi):
    vtpu.set_mode(mode)
    g = torch.Generator().manual_seed(bins)
    edges = torch.linspace(lo, hi, bins + 1)
    x = torch.cat([torch.rand(500, generator=g) * (hi - lo) * 1.2 + lo - 0.1 * (hi - lo), edges,
                   torch.tensor([lo, hi, float("nan"), float("inf"), -float("inf")])])
    got = torch.histc(x.to("tpu"), bins, lo, hi)
    assert got.dtype == torch.float32 and torch.equal(got.cpu(), torch.histc(x, bins, lo, hi))
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def test_expert_counts_and_integer_inputs():
    experts = torch.randint(0, 4, (16,), generator=torch.Generator().manual_seed(1))
    got = torch.histc(experts.to("tpu").float(), bins=4, min=0, max=3)
    assert torch.equal(got.cpu(), torch.histc(experts.float(), bins=4, min=0, max=3))
    counts = torch.histc(experts.to("tpu").int(), bins=4, min=0, max=3)  # the CPU kernel refuses ints
    assert counts.dtype == torch.int32 and torch.equal(counts.cpu(), torch.histc(experts.float(), 4, 0, 3).int())
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def test_a_range_from_the_data_is_counted_on_the_host():
    x = torch.randn(50, generator=torch.Generator().manual_seed(2))
    with pytest.raises(NotImplementedError, match="histc"):
        torch.histc(x.to("tpu"), bins=5)
    vtpu.set_cpu_fallback(True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert torch.equal(torch.histc(x.to("tpu"), bins=5).cpu(), torch.histc(x, bins=5))
    finally:
        vtpu.set_cpu_fallback(False)
