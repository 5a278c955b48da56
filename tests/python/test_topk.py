"""torch.topk on the chip (torch_bridge/csrc/aten/iota.cc: k rounds of "first position of the
largest value not yet taken"): values and int64 indices against the CPU for distinct values,
any dim, smallest-k and bf16; MoE-style routing in both modes; ties; what falls back."""
import warnings

import pytest
import torch

import vtpu


@pytest.fixture(autouse=True)
def chip(no_fallback):
    yield


@pytest.mark.parametrize("mode", ["strict_eager", "defer_and_fuse"])
@pytest.mark.parametrize("shape,k,dim,largest", [((5,), 2, 0, True), ((3, 40), 5, 1, True), ((40, 3), 3, 0, False),
                                                 ((2, 8, 64), 2, -1, True), ((4, 100), 16, 1, False), ((1, 1), 1, 1, True)])
def test_topk_matches_the_cpu(mode, shape, k, dim, largest):
    vtpu.set_mode(mode)
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(7))  # distinct values: one right answer
    values, indices = torch.topk(x.to("tpu"), k, dim, largest)
    want_values, want_indices = torch.topk(x, k, dim, largest)
    assert indices.dtype == torch.int64
    assert torch.equal(values.cpu(), want_values)
    assert torch.equal(indices.cpu(), want_indices)
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def test_bf16_values_keep_their_dtype():
    x = torch.randn(3, 50, generator=torch.Generator().manual_seed(8)).bfloat16()
    values, indices = torch.topk(x.to("tpu"), 4)
    assert values.dtype == torch.bfloat16
    torch.testing.assert_close(values.cpu(), x.gather(1, indices.cpu()), atol=0, rtol=0)
    assert torch.equal(values.cpu(), torch.topk(x, 4).values)


def test_moe_routing_stays_on_the_chip():
    """A mixture-of-experts router: softmax over 8 experts, the top 2 and their renormalised
    weights, the indices then used on the chip (one_hot-free: a comparison against an arange)."""
    logits = torch.randn(16, 8, generator=torch.Generator().manual_seed(9))
    probs = logits.to("tpu").softmax(-1)
    weights, experts = probs.topk(2, dim=-1)
    weights = weights / weights.sum(-1, keepdim=True)
    chosen = experts.unsqueeze(-1) == torch.arange(8, device="tpu")  # [16, 2, 8]
    want_w, want_e = logits.softmax(-1).topk(2, dim=-1)
    torch.testing.assert_close(weights.cpu(), want_w / want_w.sum(-1, keepdim=True))
    assert torch.equal(chosen.cpu(), want_e.unsqueeze(-1) == torch.arange(8))
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def test_ties_take_the_first_position_and_never_repeat():
    x = torch.tensor([[1.0, float("-inf"), float("-inf"), 2.0], [5.0, 5.0, 5.0, 0.0]])
    values, indices = torch.topk(x.to("tpu"), 4)
    assert torch.equal(values.cpu(), torch.topk(x, 4).values)
    assert indices.cpu().tolist() == [[3, 0, 1, 2], [0, 1, 2, 3]]


@pytest.mark.parametrize("k,largest", [(65, True), (65, False)])
def test_large_k_runs_on_the_chip_by_sorting(k, largest):
    x = torch.randn(2, 80, generator=torch.Generator().manual_seed(3))  # distinct values: one answer
    values, indices = torch.topk(x.to("tpu"), k, largest=largest)  # the fallback is off: selection from the sort
    want = torch.topk(x, k, largest=largest)
    assert torch.equal(values.cpu(), want.values) and torch.equal(indices.cpu(), want.indices)


@pytest.mark.parametrize("shape", [(3, 1000), (1, 128256)], ids=["short-rows", "llama-3-vocabulary"])
def test_largest_k_up_to_64_takes_rounds_over_rows_of_any_length(shape):
    """Top-k sampling's case (transformers' default top_k is 50) over a vocabulary longer than a
    row kernel holds: rounds, each reducing the row in pieces; a NaN counts as the largest, and
    ties take the first position."""
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(5))
    x[0, 11] = float("nan")
    x[-1, 7] = x[-1, 70] = x[-1, shape[1] - 1] = 9.0
    for k in (50, 64):
        values, indices = (t.cpu() for t in torch.topk(x.to("tpu"), k))
        torch.testing.assert_close(values, torch.topk(x, k).values, rtol=0, atol=0, equal_nan=True)
        torch.testing.assert_close(x.gather(1, indices), values, rtol=0, atol=0, equal_nan=True)
        assert all(len(set(row)) == k for row in indices.tolist())  # no position twice
        assert indices[0, 0] == 11  # the NaN
        first = 1 if shape[0] == 1 else 0  # after the NaN where they share a row
        assert indices[-1, first:first + 3].tolist() == [7, 70, shape[1] - 1]  # the ties, in order


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("k", [1, 3, 16, 64, 70])
def test_smallest_k_counts_nan_as_larger_than_inf(k, dtype):
    """torch puts NaN after +inf: smallest-k takes a row's NaN only once every other value is
    taken, its +inf before it. (Before, the rounds negated the input and so took NaN first.)
    Which of equal values comes first is not specified by torch (its CPU order differs from the
    chip's first-position rule), so values are compared, and indices through the values."""
    x = torch.randn(5, 100, generator=torch.Generator().manual_seed(6)).to(dtype)
    x[0, 5] = x[1, 3] = x[1, 50] = float("nan")
    x[2, :] = float("nan")
    x[3, :97] = float("inf")
    x[3, 10] = x[3, 98] = float("nan")  # three finite values, 95 +inf, then two NaN
    x[4, ::2] = float("-inf")
    values, indices = (t.cpu() for t in torch.topk(x.to("tpu"), k, largest=False))
    want = torch.topk(x, k, largest=False).values
    torch.testing.assert_close(values, want, rtol=0, atol=0, equal_nan=True)
    torch.testing.assert_close(x.gather(1, indices), values, rtol=0, atol=0, equal_nan=True)
    assert all(len(set(row)) == k for row in indices.tolist())  # no position twice
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def test_integer_inputs_fall_back_with_the_reason():
    x = torch.randperm(40, generator=torch.Generator().manual_seed(4)).reshape(2, 20).to(torch.int32)
    with pytest.raises(NotImplementedError, match=r"topk cannot run on the chip: non-f32/bf16/f16 inputs"):
        torch.topk(x.to("tpu"), 3)
    vtpu.set_cpu_fallback(True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the one-time fallback warning is tested elsewhere
            values, indices = torch.topk(x.to("tpu"), 3)
        assert torch.equal(values.cpu(), torch.topk(x, 3).values) and torch.equal(indices.cpu(), torch.topk(x, 3).indices)
    finally:
        vtpu.set_cpu_fallback(False)
