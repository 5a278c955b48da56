"""kthvalue, median, nanmedian and topk with k > 16 (some by sorting) on the chip (torch_bridge/csrc/aten/
order_statistics.cc: selection from the stable sort) against the CPU with the fallback off, in
both eager modes: values and indices exactly, NaN rows by torch's rules, 0-dim inputs, keepdim,
and gradients through the selected elements."""
import pytest
import torch


def gen(seed):
    return torch.Generator().manual_seed(seed)


def same(got, want):
    assert torch.equal(got.values.cpu(), want.values) or torch.allclose(got.values.cpu(), want.values, equal_nan=True)
    assert torch.equal(got.indices.cpu(), want.indices)


@pytest.mark.parametrize("call", [
    lambda x: x.kthvalue(3, 1), lambda x: x.kthvalue(5, 0, True), lambda x: x.kthvalue(1, -1),
    lambda x: x.median(1), lambda x: x.median(0, True), lambda x: x.nanmedian(-1),
    lambda x: x.topk(20, 1), lambda x: x.topk(30, 1, largest=False), lambda x: x.topk(17, 0),
], ids=["kth3", "kth5-dim0-keepdim", "kth1", "median", "median-dim0-keepdim", "nanmedian", "topk20", "topk30-smallest",
        "topk17-dim0"])
def test_matches_the_cpu(native_in_each_eager_mode, call):
    x = torch.randn(24, 37, generator=gen(0))  # distinct values: every index is determined
    same(call(x.to("tpu")), call(x))


def test_bf16_and_whole_tensor_forms(native_in_each_eager_mode):
    x = torch.randn(9, 11, generator=gen(1))
    same(x.bfloat16().to("tpu").kthvalue(4, 1), x.bfloat16().kthvalue(4, 1))
    assert torch.equal(x.to("tpu").median().cpu(), x.median())
    assert torch.equal(x.to("tpu").nanmedian().cpu(), x.nanmedian())
    s = torch.tensor(2.5)
    same(s.to("tpu").kthvalue(1), s.kthvalue(1))
    same(s.to("tpu").median(0), s.median(0))


def test_nan_rows_follow_torch(native_in_each_eager_mode):
    x = torch.randn(4, 10, generator=gen(2))
    x[1, 3] = x[1, 7] = float("nan")
    x[3, 0] = float("nan")
    same(x.to("tpu").median(1), x.median(1))  # a row with NaN: its first NaN
    same(x.to("tpu").nanmedian(1), x.nanmedian(1))  # the lower median of the rest
    same(x.to("tpu").kthvalue(10, 1), x.kthvalue(10, 1))  # NaN counts as the largest
    x[2, :] = float("nan")  # all NaN: the value is NaN (torch's CPU index for it is its own)
    assert x.to("tpu").nanmedian(1).values.cpu()[2].isnan()


def test_gradients_reach_the_selected_elements(native_in_each_eager_mode):
    x = torch.randn(6, 33, generator=gen(3))
    for f in (lambda t: t.median(1).values, lambda t: t.kthvalue(7, 1).values, lambda t: t.topk(20, 1).values):
        a, b = x.clone().requires_grad_(), x.to("tpu").requires_grad_()
        (f(a) * torch.arange(1.0, 1 + a.shape[0]).reshape(-1, *([1] * (f(a).dim() - 1)))).sum().backward()
        (f(b) * torch.arange(1.0, 1 + a.shape[0]).reshape(-1, *([1] * (f(a).dim() - 1))).to("tpu")).sum().backward()
        assert torch.equal(b.grad.cpu(), a.grad)


def test_errors_name_the_argument(native_in_each_eager_mode):
    with pytest.raises(RuntimeError, match="k out of range"):
        torch.randn(3, 4).to("tpu").kthvalue(5, 1)
    with pytest.raises(RuntimeError, match="empty"):
        torch.empty(0).to("tpu").median()
