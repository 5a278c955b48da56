"""scatter_reduce and index_reduce on the chip (torch_bridge/csrc/aten/scatter_reduce.cc): every
reduction, with and without self, functional, in place and out=, with gradients, in f32 and
bf16, against the CPU with the fallback off; what the chip cannot do (integer tensors) runs on the
CPU when the fallback is on and says why."""
import math

import pytest
import torch

import vtpu


def case(seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(5, 6, generator=g), torch.randint(0, 5, (7, 6), generator=g), torch.randn(7, 6, generator=g)


REDUCTIONS = ["sum", "mean", "amax", "amin", "prod"]


@pytest.mark.parametrize("reduce", REDUCTIONS)
@pytest.mark.parametrize("include_self", [True, False])
def test_matches_the_cpu(native_in_each_eager_mode, reduce, include_self):
    self, index, src = case()
    want = self.scatter_reduce(0, index, src, reduce, include_self=include_self)
    got = self.to("tpu").scatter_reduce(0, index.to("tpu"), src.to("tpu"), reduce, include_self=include_self)
    torch.testing.assert_close(got.cpu(), want)
    inplace = self.to("tpu")
    inplace.scatter_reduce_(1, index[:5].remainder(6).to("tpu"), src[:5].to("tpu"), reduce, include_self=include_self)
    torch.testing.assert_close(inplace.cpu(), self.clone().scatter_reduce_(1, index[:5].remainder(6), src[:5], reduce,
                                                                            include_self=include_self))
    out = torch.empty(5, 6, device="tpu")
    torch.scatter_reduce(self.to("tpu"), 0, index.to("tpu"), src.to("tpu"), reduce, include_self=include_self, out=out)
    torch.testing.assert_close(out.cpu(), want)


@pytest.mark.parametrize("reduce", REDUCTIONS)
def test_gradients_match_the_cpu(native_in_each_eager_mode, reduce):
    self, index, src = case(1)
    a, b = self.clone().requires_grad_(), self.to("tpu").requires_grad_()
    sa, sb = src.clone().requires_grad_(), src.to("tpu").requires_grad_()
    a.scatter_reduce(0, index, sa, reduce).pow(2).sum().backward()
    b.scatter_reduce(0, index.to("tpu"), sb, reduce).pow(2).sum().backward()
    torch.testing.assert_close(b.grad.cpu(), a.grad)
    torch.testing.assert_close(sb.grad.cpu(), sa.grad)


@pytest.mark.parametrize("reduce", ["amax", "amin", "prod"])
def test_bf16_matches_the_cpu(native_in_each_eager_mode, reduce):
    self, index, src = (t.to(torch.bfloat16) if t.is_floating_point() else t for t in case(4))
    want = self.scatter_reduce(1, index[:5].remainder(6), src[:5], reduce, include_self=False)
    got = self.to("tpu").scatter_reduce(1, index[:5].remainder(6).to("tpu"), src[:5].to("tpu"), reduce, include_self=False)
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got.cpu(), want)


@pytest.mark.parametrize("reduce", ["amax", "amin"])
def test_nan_propagates_as_on_the_cpu(native_in_each_eager_mode, reduce):
    self = torch.tensor([1.0, math.nan, 3.0, 4.0])
    index, src = torch.tensor([0, 0, 2, 1]), torch.tensor([math.nan, 5.0, -1.0, 2.0])
    for include_self in (True, False):
        want = self.scatter_reduce(0, index, src, reduce, include_self=include_self)
        got = self.to("tpu").scatter_reduce(0, index.to("tpu"), src.to("tpu"), reduce, include_self=include_self)
        torch.testing.assert_close(got.cpu(), want, equal_nan=True)


@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_reduce_matches_the_cpu(native_in_each_eager_mode, reduce, include_self, dim):
    g = torch.Generator().manual_seed(5)
    self = torch.randn(4, 5, 3, generator=g)
    size = self.size(dim)
    index = torch.tensor([0, size - 1, 0, 1, size - 1])
    shape = list(self.shape)
    shape[dim] = len(index)
    source = torch.randn(shape, generator=g)
    want = self.index_reduce(dim, index, source, reduce, include_self=include_self)
    got = self.to("tpu").index_reduce(dim, index.to("tpu"), source.to("tpu"), reduce, include_self=include_self)
    torch.testing.assert_close(got.cpu(), want)
    inplace = self.to("tpu")
    inplace.index_reduce_(dim, index.to("tpu"), source.to("tpu"), reduce, include_self=include_self)
    torch.testing.assert_close(inplace.cpu(), want)


def test_integer_tensors_fall_back_named(cpu_fallback):
    self, index = torch.arange(5), torch.tensor([0, 0, 3])
    src = torch.tensor([7, -2, 9])
    vtpu.reset_stats()
    with pytest.warns(UserWarning, match=r"scatter_reduce runs on the CPU \(scattering into non-float tensors"):
        got = self.to("tpu").scatter_reduce(0, index.to("tpu"), src.to("tpu"), "amax")
    torch.testing.assert_close(got.cpu(), self.scatter_reduce(0, index, src, "amax"))
    assert vtpu.stats()["cpu_fallbacks"].get("aten::scatter_reduce") == 1


def test_integer_tensors_refuse_without_the_fallback(no_fallback):
    with pytest.raises(NotImplementedError, match=r"scatter_reduce cannot run on the chip: scattering into non-float"):
        torch.arange(5, device="tpu").scatter_reduce(0, torch.tensor([1], device="tpu"), torch.tensor([3], device="tpu"), "prod")


@pytest.mark.parametrize("reduce", ["amax", "prod"])
def test_index_reduce_of_a_scalar(native_in_each_eager_mode, reduce):
    want = torch.tensor(2.0).index_reduce(0, torch.tensor([0]), torch.tensor(5.0), reduce)
    got = torch.tensor(2.0, device="tpu").index_reduce(0, torch.tensor([0], device="tpu"), torch.tensor(5.0, device="tpu"),
                                                       reduce)
    assert got.shape == () and got.dtype == torch.float32
    torch.testing.assert_close(got.cpu(), want)
