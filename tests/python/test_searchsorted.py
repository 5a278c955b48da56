"""torch.searchsorted and torch.bucketize on the chip (torch_bridge/csrc/aten/searchsorted.cc: the
boundaries below each value counted by a compare and a row sum) against the CPU with the fallback
off: both sides, 1-D and batched boundaries, a sorter, scalar values, int32 output, integer
boundaries, and the CPU's argument errors."""
import pytest
import torch


def gen(seed):
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("right", [False, True])
def test_matches_the_cpu(native_in_each_eager_mode, right):
    edges = torch.tensor([1.0, 3.0, 3.0, 5.0, 7.0, 9.0])  # a repeated boundary: the sides differ there
    values = torch.tensor([[0.0, 3.0, 6.0], [9.0, 10.0, 1.0]])
    got = torch.searchsorted(edges.to("tpu"), values.to("tpu"), right=right)
    assert got.dtype == torch.int64
    assert torch.equal(got.cpu(), torch.searchsorted(edges, values, right=right))
    side = "right" if right else "left"
    assert torch.equal(torch.searchsorted(edges.to("tpu"), values.to("tpu"), side=side).cpu(),
                       torch.searchsorted(edges, values, side=side))
    x = torch.rand(1000, generator=gen(1)) * 10
    bins = torch.linspace(0, 10, 11)
    assert torch.equal(torch.bucketize(x.to("tpu"), bins.to("tpu"), right=right).cpu(), torch.bucketize(x, bins, right=right))


def test_batched_sorter_scalar_int32_and_integers(native_in_each_eager_mode):
    edges = torch.sort(torch.randn(3, 8, generator=gen(2))).values
    values = torch.randn(3, 5, generator=gen(3))
    assert torch.equal(torch.searchsorted(edges.to("tpu"), values.to("tpu")).cpu(), torch.searchsorted(edges, values))
    unsorted = torch.tensor([3.0, 1.0, 2.0])
    sorter = torch.argsort(unsorted)
    assert torch.equal(torch.searchsorted(unsorted.to("tpu"), values[0].to("tpu"), sorter=sorter.to("tpu")).cpu(),
                       torch.searchsorted(unsorted, values[0], sorter=sorter))
    assert torch.equal(torch.searchsorted(edges[0].to("tpu"), 0.25).cpu(), torch.searchsorted(edges[0], 0.25))
    out = torch.searchsorted(edges.to("tpu"), values.to("tpu"), out_int32=True)
    assert out.dtype == torch.int32 and torch.equal(out.cpu(), torch.searchsorted(edges, values, out_int32=True))
    ints = torch.arange(0, 100, 7)
    queries = torch.tensor([5, 14, 99, -3])
    assert torch.equal(torch.searchsorted(ints.to("tpu"), queries.to("tpu")).cpu(), torch.searchsorted(ints, queries))


def test_argument_errors_match_the_cpus(native_in_each_eager_mode):
    edges = torch.tensor([1.0, 2.0])
    with pytest.raises(RuntimeError, match="side can only be 'left' or 'right'"):
        torch.searchsorted(edges.to("tpu"), edges.to("tpu"), side="middle")
    with pytest.raises(RuntimeError, match="side and right can't be set to opposites"):
        torch.searchsorted(edges.to("tpu"), edges.to("tpu"), side="left", right=True)
    with pytest.raises(RuntimeError, match="first N-1 dimensions"):
        torch.searchsorted(torch.zeros(2, 3).to("tpu"), torch.zeros(3, 3).to("tpu"))
