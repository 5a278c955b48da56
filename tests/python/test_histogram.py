"""torch.histogram and torch.histogramdd on the chip (torch_bridge/python/vtpu/histogram.py)
against torch's CPU kernel: bin counts and ranges, explicit edges, weights, density, elements on
the edges (the last bin keeps its right edge), NaN and out-of-range elements skipped, an empty
range widened, the CPU's errors, and histogramdd over 3 dims with counts, ranges and explicit
edges. Both ran on the CPU fallback before."""
import pytest
import torch

pytestmark = pytest.mark.usefixtures("native_in_each_eager_mode")


def assert_histogram_matches_cpu(x, *args, **kwargs):
    to_tpu = lambda v: v.to("tpu") if isinstance(v, torch.Tensor) else v  # noqa: E731
    want = torch.histogram(x, *args, **kwargs)
    got = torch.histogram(x.to("tpu"), *(to_tpu(a) for a in args), **{k: to_tpu(v) for k, v in kwargs.items()})
    torch.testing.assert_close(got.bin_edges.cpu(), want.bin_edges, rtol=0, atol=0)  # the CPU's linspace, bit for bit
    torch.testing.assert_close(got.hist.cpu(), want.hist, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("bins", [1, 7, 100])
@pytest.mark.parametrize("density", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
def test_bin_counts_match_the_cpu(bins, density, weighted):
    g = torch.Generator().manual_seed(bins)
    x = torch.randn(3, 200, generator=g)
    weight = torch.rand(3, 200, generator=g) if weighted else None
    assert_histogram_matches_cpu(x, bins, weight=weight, density=density)
    assert_histogram_matches_cpu(x, bins, range=(-1.3, 0.7), weight=weight, density=density)


def test_elements_on_the_edges_fall_as_on_the_cpu():
    # Integers 0..20 over 20 bins of [0, 20]: every element is an edge; 20 stays in the last bin.
    # A range of 1/3-wide bins puts elements within an ulp of the CPU's linspace edges.
    x = torch.arange(21, dtype=torch.float32).repeat(3)
    assert_histogram_matches_cpu(x, 20)
    thirds = torch.linspace(-1, 1, 61)
    assert_histogram_matches_cpu(torch.cat([thirds, thirds.nextafter(torch.tensor(2.0)), thirds.nextafter(torch.tensor(-2.0))]), 6,
                       range=(-1.0, 1.0))


def test_nan_and_out_of_range_elements_are_skipped():
    x = torch.tensor([0.5, float("nan"), 2.0, -3.0, float("inf"), 1.0, 0.0])
    assert_histogram_matches_cpu(x, 4, range=(0.0, 1.0))
    assert_histogram_matches_cpu(x, torch.tensor([0.0, 0.25, 0.3, 1.0]))


def test_an_empty_range_is_widened_by_a_half():
    assert_histogram_matches_cpu(torch.full((10,), 3.0), 5)
    assert_histogram_matches_cpu(torch.empty(0), 4)


def test_explicit_edges_with_weights_and_density():
    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(500, generator=g), torch.rand(500, generator=g)
    edges = torch.tensor([-2.0, -0.5, -0.1, 0.0, 0.3, 1.5, 4.0])
    for density in (False, True):
        assert_histogram_matches_cpu(x, edges, weight=w, density=density)


def test_errors_are_the_cpus():
    x = torch.randn(10, device="tpu")
    with pytest.raises(RuntimeError, match=r"bins must be > 0, but got 0"):
        torch.histogram(x, 0)
    with pytest.raises(RuntimeError, match=r"min should not exceed max, but got min 2 max 1"):
        torch.histogram(x, 3, range=(2.0, 1.0))
    with pytest.raises(RuntimeError, match=r"range \[-inf, 1\] is not finite"):
        torch.histogram(x, 3, range=(float("-inf"), 1.0))
    with pytest.raises(RuntimeError, match=r"range \[.*, inf\] is not finite"):
        torch.histogram(torch.tensor([1.0, float("inf")], device="tpu"), 3)
    with pytest.raises(RuntimeError, match=r"should have the same dtype"):
        torch.histogram(x, 3, weight=torch.ones(10, dtype=torch.float64, device="tpu"))


@pytest.mark.parametrize("density", [False, True])
def test_histogramdd_matches_the_cpu(density):
    g = torch.Generator().manual_seed(1)
    points, w = torch.randn(4, 50, 3, generator=g), torch.rand(4, 50, generator=g)
    edges = [torch.tensor([-1.0, 0.0, 0.5, 2.0]), torch.linspace(-2, 2, 6), torch.tensor([-3.0, 3.0])]
    for bins, kwargs in (([3, 4, 5], {}), ([2, 2, 7], {"range": [-1.0, 1.0, -0.5, 0.5, 0.0, 2.0]}), (edges, {})):
        for weight in (None, w):
            want = torch.histogramdd(points, bins, weight=weight, density=density, **kwargs)
            got = torch.histogramdd(points.to("tpu"), [b.to("tpu") if isinstance(b, torch.Tensor) else b for b in bins],
                                    weight=None if weight is None else weight.to("tpu"), density=density, **kwargs)
            torch.testing.assert_close(got.hist.cpu(), want.hist, rtol=1e-5, atol=1e-6)
            for e_got, e_want in zip(got.bin_edges, want.bin_edges):
                torch.testing.assert_close(e_got.cpu(), e_want, rtol=0, atol=0)
    with pytest.raises(RuntimeError, match=r"weight tensor is provided it should have the same shape"):
        torch.histogramdd(points.to("tpu"), [2, 2, 2], weight=w.reshape(-1).to("tpu"))
    with pytest.raises(RuntimeError, match=r"The size of bins must be equal to the innermost dimension"):
        torch.histogramdd(points.to("tpu"), [2, 2])


def test_float64_declines_to_the_cpu_named():
    # Not float32: the op is named for the fallback (a "name.overload" string once failed to resolve).
    x = torch.randn(10, dtype=torch.float64, device="tpu")
    with pytest.raises(NotImplementedError, match=r"aten::histogram.bin_ct cannot run on the chip: torch.float64"):
        torch.histogram(x, 3)
    with pytest.raises(NotImplementedError, match=r"aten::_histogramdd_bin_edges cannot run on the chip"):
        torch.histogramdd(x.view(5, 2), [2, 2])
    with pytest.raises(RuntimeError, match=r"input tensor and bins tensors should have the same dtype"):
        torch.histogram(x.float(), torch.tensor([0.0, 1.0], dtype=torch.float64, device="tpu"))
