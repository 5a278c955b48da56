"""Decompose before falling back (torch_bridge/python/vtpu/decompositions.py): ops without a
lowering run as torch's own decomposition on the chip, counted per op; ops whose decomposition
cannot make progress say so and fall back only where allowed. Also the lowerings the
decompositions lean on: int64 `where` on word pairs and batch norm's training statistics."""
import pathlib
import sys

import pytest
import torch
import torch.nn.functional as F

import vtpu

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench"))
import training_steps  # noqa: E402


pytestmark = pytest.mark.usefixtures("each_eager_mode", "no_fallback")


def test_cross_entropy_runs_as_decompositions_on_the_chip():
    torch.manual_seed(0)
    logits, target = torch.randn(10, 7), torch.tensor([1, 2, 3, 0, 6, 1, -100, 2, 5, -100])
    grads = {}
    for device in ("cpu", "tpu"):
        x = logits.detach().to(device).requires_grad_()
        loss = F.cross_entropy(x, target.to(device), label_smoothing=0.1)
        loss.backward()
        grads[device] = (loss.detach().cpu(), x.grad.cpu())
    torch.testing.assert_close(grads["tpu"], grads["cpu"], atol=1e-6, rtol=1e-5)
    s = vtpu.stats()
    assert s["cpu_fallback_ops"] == 0
    assert s["decomposed"]["aten::nll_loss_forward"] == 1 and s["decomposed"]["aten::nll_loss_backward"] == 1


def test_decomposed_counts_reset_with_the_other_counters():
    F.mse_loss(torch.randn(4, device="tpu"), torch.randn(4, device="tpu"))
    F.nll_loss(torch.randn(3, 4, device="tpu"), torch.tensor([0, 1, 2], device="tpu"))
    assert vtpu.stats()["decomposed"]
    vtpu.reset_stats()
    assert vtpu.stats()["decomposed"] == {}


def test_a_decomposition_that_comes_back_to_its_op_names_it_and_does_not_recurse():
    # torch's decomposition of gcd is a prim that calls the aten op again
    x = torch.arange(6, dtype=torch.int32, device="tpu")
    other = torch.tensor([4, 2, 6, 3, 8, 10], dtype=torch.int32, device="tpu")
    with pytest.raises(NotImplementedError, match=r"aten::gcd is not lowered to the chip yet "
                                                  r"\(torch's decomposition of it comes back to it\)"):
        torch.gcd(x, other)
    vtpu.set_cpu_fallback(True)
    with pytest.warns(UserWarning, match="aten::gcd runs on the CPU"):
        got = torch.gcd(x, other)
    assert torch.equal(got.cpu(), torch.gcd(x.cpu(), other.cpu()))
    s = vtpu.stats()
    assert s["cpu_fallbacks"]["aten::gcd"] == 1
    assert s["decomposition_declined"]["aten::gcd"] == 2


def test_int64_where_keeps_values_past_int32():
    big = torch.tensor([2**40 + 3, -(2**35), 7, 2**62], dtype=torch.long)
    small = torch.tensor([1, 2, 3, 4])
    cond = torch.tensor([True, False, True, False])
    for a, b in ((big, small), (big, 0), (5, big)):
        want = torch.where(cond, a, b)
        dev = [v.to("tpu") if isinstance(v, torch.Tensor) else v for v in (a, b)]
        got = torch.where(cond.to("tpu"), *dev)
        assert got.dtype == torch.long and torch.equal(got.cpu(), want)
    # broadcast condition over rows; 0-dim operands
    cond2 = torch.tensor([[True], [False]])
    got = torch.where(cond2.to("tpu"), big.to("tpu"), torch.tensor(-1).to("tpu"))
    assert torch.equal(got.cpu(), torch.where(cond2, big, torch.tensor(-1)))
    assert vtpu.stats()["cpu_fallback_ops"] == 0


@pytest.mark.parametrize("shape", [(6, 4), (4, 3, 5), (2, 3, 4, 5)])
def test_batch_norm_training_statistics_on_the_chip(shape):
    torch.manual_seed(1)
    x = torch.randn(shape) * 3 + 1
    modules = {}
    for device in ("cpu", "tpu"):
        bn = torch.nn.BatchNorm1d(shape[1]) if len(shape) < 4 else torch.nn.BatchNorm2d(shape[1])
        bn.weight.data.uniform_(0.5, 1.5, generator=torch.Generator().manual_seed(2))
        bn = bn.to(device).train()
        inp = x.detach().to(device).requires_grad_()
        out = bn(inp)
        (out * torch.arange(out.numel()).reshape(out.shape).to(device)).sum().backward()
        modules[device] = (out.detach().cpu(), inp.grad.cpu(), bn.weight.grad.cpu(), bn.running_mean.cpu(),
                           bn.running_var.cpu(), bn.num_batches_tracked.cpu())
    torch.testing.assert_close(modules["tpu"], modules["cpu"], atol=2e-4, rtol=1e-4)
    assert vtpu.stats()["cpu_fallback_ops"] == 0


@pytest.mark.parametrize("case", ["resnet_case", "gpt2_case"])
def test_training_steps_run_natively_and_follow_the_cpu(case):
    result = training_steps.run(case, getattr(training_steps, case), steps=1)
    assert result["stopped_at"] is None
    assert result["stats"]["cpu_fallback_ops"] == 0
    torch.testing.assert_close(result["tpu_losses"], result["cpu_losses"], atol=1e-4, rtol=1e-5)


@pytest.mark.parametrize("batch", [1, 2])
@pytest.mark.parametrize("training", [False, True])
def test_batch_norm_backward_with_a_gradient_laid_out_channels_last(training, batch):
    # CvT's and LeViT's projections: conv -> BatchNorm2d -> view -> permute, so the gradient reaching
    # batch norm is a permuted (channels-last-like) view while its input is contiguous. The chip's
    # gradients equal the math computed on a contiguous gradient in float64. (torch's CPU kernel
    # differs here: it reads the mixed layouts as one, which is why the zoo's training column counts
    # cvt and levit as mismatches.)
    torch.manual_seed(0)
    bn = torch.nn.BatchNorm2d(8).train(training)
    x = torch.randn(batch, 8, 2, 2)
    g = torch.randn(batch, 4, 8)

    def grads(module, x, g):
        x = x.detach().requires_grad_()
        module.zero_grad()
        out = module(x * 2).view(x.shape[0], 8, 4).permute(0, 2, 1)
        (out * g).sum().backward()
        return [x.grad, module.weight.grad, module.bias.grad]

    import copy

    reference = copy.deepcopy(bn).double()
    want = grads(reference, x.double(), g.double().permute(0, 2, 1).contiguous().permute(0, 2, 1))
    got = grads(copy.deepcopy(bn).to("tpu"), x.to("tpu"), g.to("tpu"))
    for a, b in zip(want, got):
        torch.testing.assert_close(b.cpu().double(), a, rtol=1e-4, atol=1e-5)
    if batch == 1:  # LeViT's case: torch 2.13's CPU kernel misreads the gradient (x's gradient is off)
        on_cpu = grads(copy.deepcopy(bn), x, g)
        assert not torch.allclose(on_cpu[0].double(), want[0], rtol=1e-4, atol=1e-5)
