"""scatter_reduce's 'sum' and 'mean' on the chip (torch_bridge/csrc/aten/scatter_reduce.cc), with
and without self, functional, in place and out=, with gradients, against the CPU with the
fallback off; the other reductions run on the CPU when the fallback is on and say why."""
import pytest
import torch

import vtpu


def case(seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(5, 6, generator=g), torch.randint(0, 5, (7, 6), generator=g), torch.randn(7, 6, generator=g)


@pytest.mark.parametrize("reduce", ["sum", "mean"])
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


@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_gradients_match_the_cpu(native_in_each_eager_mode, reduce):
    self, index, src = case(1)
    a, b = self.clone().requires_grad_(), self.to("tpu").requires_grad_()
    sa, sb = src.clone().requires_grad_(), src.to("tpu").requires_grad_()
    a.scatter_reduce(0, index, sa, reduce).pow(2).sum().backward()
    b.scatter_reduce(0, index.to("tpu"), sb, reduce).pow(2).sum().backward()
    torch.testing.assert_close(b.grad.cpu(), a.grad)
    torch.testing.assert_close(sb.grad.cpu(), sa.grad)


def test_other_reductions_fall_back_named(cpu_fallback):
    self, index, src = case(2)
    vtpu.reset_stats()
    with pytest.warns(UserWarning, match=r"scatter_reduce runs on the CPU \(reduce='amax'"):
        got = self.to("tpu").scatter_reduce(0, index.to("tpu"), src.to("tpu"), "amax")
    torch.testing.assert_close(got.cpu(), self.scatter_reduce(0, index, src, "amax"))
    assert vtpu.stats()["cpu_fallbacks"].get("aten::scatter_reduce") == 1


def test_other_reductions_refuse_without_the_fallback(no_fallback):
    self, index, src = case(3)
    with pytest.raises(NotImplementedError, match=r"scatter_reduce cannot run on the chip: reduce='prod'"):
        self.to("tpu").scatter_reduce(0, index.to("tpu"), src.to("tpu"), "prod")
