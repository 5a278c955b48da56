"""nn.EmbeddingBag / F.embedding_bag on the chip (vtpu/embedding_bag.py), composed of lowered ops:
every mode, padding_idx, include_last_offset, 2-D inputs, per_sample_weights and empty bags,
forward and gradients against the CPU with the fallback off; what is not composed
(scale_grad_by_freq) falls back named."""
import copy

import pytest
import torch
import torch.nn.functional as F

import vtpu

native = pytest.mark.usefixtures("native_in_each_eager_mode")


def _case(seed=0):
    g = torch.Generator().manual_seed(seed)
    weight = torch.randn(12, 5, generator=g)
    indices = torch.tensor([1, 2, 4, 5, 4, 3, 11, 0, 4])
    offsets = torch.tensor([0, 3, 3, 7])  # bag 1 is empty
    return weight, indices, offsets


@native
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("padding_idx", [None, 4])
@pytest.mark.parametrize("include_last_offset", [False, True])
def test_forward_and_gradient_match_the_cpu(mode, padding_idx, include_last_offset):
    weight, indices, offsets = _case()
    if include_last_offset:
        offsets = torch.cat([offsets, torch.tensor([indices.numel()])])
    results = {}
    for device in ("cpu", "tpu"):
        w = weight.to(device).detach().requires_grad_()
        out = F.embedding_bag(indices.to(device), w, offsets.to(device), mode=mode, padding_idx=padding_idx,
                              include_last_offset=include_last_offset)
        (out * torch.arange(out.numel(), dtype=out.dtype).reshape(out.shape).to(device)).sum().backward()
        results[device] = (out.detach().cpu(), w.grad.cpu())
    torch.testing.assert_close(results["tpu"], results["cpu"])


@native
def test_per_sample_weights_and_their_gradient():
    weight, indices, offsets = _case(1)
    psw = torch.rand(indices.numel(), generator=torch.Generator().manual_seed(2))
    grads = {}
    for device in ("cpu", "tpu"):
        w, p = weight.to(device).detach().requires_grad_(), psw.to(device).detach().requires_grad_()
        F.embedding_bag(indices.to(device), w, offsets.to(device), mode="sum", per_sample_weights=p).square().sum().backward()
        grads[device] = (w.grad.cpu(), p.grad.cpu())
    torch.testing.assert_close(grads["tpu"], grads["cpu"])


@native
def test_two_dimensional_input_is_fixed_size_bags():
    weight, _, _ = _case(3)
    indices = torch.tensor([[0, 3, 3], [11, 2, 7]])
    for mode in ("sum", "mean", "max"):
        want = F.embedding_bag(indices, weight, mode=mode)
        torch.testing.assert_close(F.embedding_bag(indices.to("tpu"), weight.to("tpu"), mode=mode).cpu(), want)


@native
def test_auxiliary_outputs_match_the_cpus_max_mode():
    weight, indices, offsets = _case(4)
    want = torch.ops.aten._embedding_bag(weight, indices, offsets, False, 2, False, None, False, -1)
    got = torch.ops.aten._embedding_bag(weight.to("tpu"), indices.to("tpu"), offsets.to("tpu"), False, 2, False, None,
                                        False, -1)
    for g, w in zip(got, want):
        assert torch.equal(g.cpu(), w)


@native
def test_an_embedding_bag_model_trains_like_the_cpu():
    torch.manual_seed(5)
    model = torch.nn.Sequential(torch.nn.EmbeddingBag(20, 8, mode="mean"), torch.nn.Linear(8, 3))
    indices, offsets = torch.randint(0, 20, (30,)), torch.tensor([0, 4, 10, 10, 21])
    target = torch.tensor([0, 2, 1, 1, 0])
    params = {}
    for device in ("cpu", "tpu"):
        m = copy.deepcopy(model).to(device)
        opt = torch.optim.AdamW(m.parameters(), lr=0.01)
        for _ in range(2):
            opt.zero_grad()
            bags = m[0](indices.to(device), offsets.to(device))
            F.cross_entropy(m[1](bags), target.to(device)).backward()
            opt.step()
        params[device] = [p.detach().cpu() for p in m.parameters()]
    torch.testing.assert_close(params["tpu"], params["cpu"])


def test_scale_grad_by_freq_is_not_composed_and_says_so(no_fallback):
    weight, indices, offsets = _case()
    with pytest.raises(NotImplementedError, match="aten::_embedding_bag.* cannot run on the chip: scale_grad_by_freq"):
        F.embedding_bag(indices.to("tpu"), weight.to("tpu"), offsets.to("tpu"), scale_grad_by_freq=True)


def test_scale_grad_by_freq_falls_back_counted(cpu_fallback):
    weight, indices, offsets = _case()
    vtpu.reset_stats()
    with pytest.warns(UserWarning, match=r"aten::_embedding_bag_forward_only runs on the CPU \(scale_grad_by_freq\)"):
        got = F.embedding_bag(indices.to("tpu"), weight.to("tpu"), offsets.to("tpu"), scale_grad_by_freq=True)
    torch.testing.assert_close(got.cpu(), F.embedding_bag(indices, weight, offsets, scale_grad_by_freq=True))
    assert vtpu.stats()["cpu_fallbacks"] == {"aten::_embedding_bag_forward_only": 1}


@native
def test_bf16_bags_are_summed_in_f32_and_rounded_once():
    weight, indices, offsets = _case(6)
    weight = weight.bfloat16()
    for mode in ("sum", "mean"):
        got = F.embedding_bag(indices.to("tpu"), weight.to("tpu"), offsets.to("tpu"), mode=mode)
        assert got.dtype == torch.bfloat16
        assert torch.equal(got.cpu(), F.embedding_bag(indices, weight.float(), offsets, mode=mode).bfloat16())
