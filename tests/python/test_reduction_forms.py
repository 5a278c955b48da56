"""Reduction, indexing and concatenation forms that used to leave the chip or fail on it: sum, mean and cumsum with a float
dtype argument (the CPU converts first, then reduces), bool counts into floats, the scan of a 0-d
or empty tensor, the legacy scatter(reduce='add' | 'multiply'), a gather with an empty index and a cat of only
legacy empty 1-d tensors;
each against the CPU in each eager mode with no CPU op."""
import warnings

import pytest
import torch

pytestmark = pytest.mark.usefixtures("native_in_each_eager_mode")


@pytest.mark.parametrize("source,target", [(torch.float32, torch.bfloat16), (torch.bfloat16, torch.float32),
                                           (torch.float16, torch.float32), (torch.float32, torch.float16)], ids=str)
@pytest.mark.parametrize("fn", [lambda t, d: t.sum(1, dtype=d), lambda t, d: t.sum(dtype=d), lambda t, d: t.mean(0, dtype=d),
                                lambda t, d: t.cumsum(1, dtype=d)], ids=["sum_dim", "sum", "mean", "cumsum"])
def test_a_float_dtype_argument_converts_then_reduces(source, target, fn):
    x = torch.randn(6, 130, generator=torch.Generator().manual_seed(0)).to(source)
    got, want = fn(x.to("tpu"), target).cpu(), fn(x, target)
    assert got.dtype == want.dtype == target
    tolerance = 1.6e-2 if torch.bfloat16 in (source, target) else 2e-3
    torch.testing.assert_close(got, want, atol=tolerance * 4, rtol=tolerance)


def test_bools_count_into_a_float_sum():
    x = torch.randn(5, 300, generator=torch.Generator().manual_seed(1)) > 0.3
    assert torch.equal(x.to("tpu").sum(1, dtype=torch.float32).cpu(), x.sum(1, dtype=torch.float32))
    v = torch.tensor([0.0, 1.5, 0.0, -2.0])
    assert torch.linalg.vector_norm(v.to("tpu"), 0).item() == 2.0  # ord 0 counts nonzeros this way


def test_the_scan_of_a_0d_or_empty_tensor_is_itself():
    for x in (torch.tensor(3.5), torch.empty(0, 4), torch.tensor(7, dtype=torch.int32)):
        got, want = x.to("tpu").cumsum(0).cpu(), x.cumsum(0)
        assert got.dtype == want.dtype and torch.equal(got, want)
    with pytest.raises(IndexError):
        torch.tensor(3.5, device="tpu").cumsum(1)


@pytest.mark.parametrize("reduce", ["add", "multiply"])
def test_legacy_scatter_reduce_forms(reduce):
    index = torch.tensor([[0, 1, 2, 0, 1], [2, 2, 0, 1, 0]])
    src = torch.arange(1.0, 11.0).reshape(2, 5)
    base = torch.full((3, 5), 2.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's deprecation of the reduce argument (once per process)
        got = base.to("tpu").scatter(0, index.to("tpu"), src.to("tpu"), reduce=reduce).cpu()
        want = base.scatter(0, index, src, reduce=reduce)
    assert torch.equal(got, want)
    assert torch.equal(base.to("tpu").scatter(0, index.to("tpu"), 1.5, reduce=reduce).cpu(),
                       base.scatter(0, index, 1.5, reduce=reduce))
    in_place = base.to("tpu")
    in_place.scatter_(0, index.to("tpu"), 1.5, reduce=reduce)
    assert torch.equal(in_place.cpu(), base.clone().scatter_(0, index, 1.5, reduce=reduce))


def test_a_gather_with_an_empty_index_is_empty():
    x = torch.randn(3, 4)
    got = x.to("tpu").gather(1, torch.empty(3, 0, dtype=torch.long, device="tpu"))
    assert got.shape == (3, 0) and got.device.type == "tpu"
    empty = torch.empty(0)
    assert torch.searchsorted(empty.to("tpu"), empty.to("tpu")).shape == torch.searchsorted(empty, empty).shape


def test_a_cat_of_only_legacy_empty_tensors_is_empty():
    parts = [torch.empty(0), torch.empty(0, dtype=torch.int32)]
    got, want = torch.cat([p.to("tpu") for p in parts]), torch.cat(parts)
    assert got.shape == want.shape and got.dtype == want.dtype and got.device.type == "tpu"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("op", ["sum", "mean", "amax", "amin"])
def test_a_reduction_over_middle_dims_reads_its_input_once_without_a_transpose(dtype, op):
    """Over a run of middle dims (grouped-query attention's key and value gradients sum the
    expanded query-head group, [b, kv_heads, group, seq, d] over the group), the slices are
    combined elementwise, each read in place: one kernel reading x once, where a permute moving the
    group last was a transpose of 4-element rows, slow on the chip and slower to simulate."""
    import vtpu

    x = torch.randn(2, 8, 4, 64, 128, generator=torch.Generator().manual_seed(3)).to(dtype)
    x[1, 2, 3, 5, 7] = float("nan")
    vtpu.synchronize()
    vtpu.reset_stats()
    got = getattr(x.to("tpu"), op)(2).cpu()
    vtpu.synchronize()
    s = vtpu.stats()
    torch.testing.assert_close(got, getattr(x, op)(2), equal_nan=True, atol=0, rtol=0)  # f32 sums, one rounding
    assert not any("permute" in label for label in s["per_kernel"]), s["per_kernel"]
    reads = sum(v["hbm_read_bytes"] for k, v in s["per_kernel"].items() if "reduce_slice" in k)
    assert reads == x.numel() * x.element_size(), s["per_kernel"]


def test_grouped_query_attentions_key_gradient_sums_its_group_without_a_transpose():
    import vtpu

    k = torch.randn(1, 2, 64, 128, generator=torch.Generator().manual_seed(4), requires_grad=True)
    grad = torch.randn(1, 8, 64, 128, generator=torch.Generator().manual_seed(5))
    # transformers' repeat_kv: each key/value head expanded over its group of query heads
    expand = lambda t: t[:, :, None].expand(1, 2, 4, 64, 128).reshape(1, 8, 64, 128)  # noqa: E731
    k_tpu = k.detach().to("tpu").requires_grad_()
    vtpu.synchronize()
    vtpu.reset_stats()
    expand(k_tpu).backward(grad.to("tpu"))
    got = k_tpu.grad.cpu()
    expand(k).backward(grad)
    torch.testing.assert_close(got, k.grad)
    assert not any("permute" in label for label in vtpu.stats()["per_kernel"]), vtpu.stats()["per_kernel"]
