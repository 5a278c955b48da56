"""torch.multinomial on the chip (torch_bridge/csrc/aten/multinomial.cc) with the fallback off, in
both eager modes. Its numbers come from the chip's Philox stream, so draws are checked by their
distribution (frequencies against the probabilities, with bounds many standard deviations wide),
by the rules samples obey (zero-probability categories never drawn, no repeats without
replacement), by reproducibility under torch.tpu.manual_seed, and by the CPU's argument errors."""
import pytest
import torch

P = torch.tensor([0.1, 0.0, 0.6, 0.3])


def frequencies(samples, n):
    return torch.bincount(samples.reshape(-1).cpu(), minlength=n).double() / samples.numel()


def test_with_replacement_follows_the_probabilities(native_in_each_eager_mode):
    draws = 40000
    s = torch.multinomial(P.to("tpu"), draws, replacement=True)
    assert s.dtype == torch.int64 and s.shape == (draws,)
    # standard deviation of a frequency <= 0.0025 here: 0.015 is six of them
    assert torch.allclose(frequencies(s, 4), P.double(), atol=0.015)
    assert not (s.cpu() == 1).any()  # probability zero: never drawn


def test_without_replacement_draws_distinct_categories_in_torch_s_distribution(native_in_each_eager_mode):
    rows = 20000
    s = torch.multinomial(P.to("tpu").expand(rows, 4).contiguous(), 2).cpu()
    assert s.shape == (rows, 2)
    assert (s[:, 0] != s[:, 1]).all() and not (s == 1).any()
    # first draw ~ p; second draw ~ sum_i p_i p_j / (1 - p_i) (drawing one at a time, renormalising)
    p = P.double()
    second = torch.stack([sum(p[i] * p[j] / (1 - p[i]) for i in range(4) if i != j) for j in range(4)])
    assert torch.allclose(frequencies(s[:, 0], 4), p, atol=0.02)
    assert torch.allclose(frequencies(s[:, 1], 4), second, atol=0.02)


def test_every_positive_category_is_drawn_when_all_are_asked_for(native_in_each_eager_mode):
    logits = torch.randn(3, 50, generator=torch.Generator().manual_seed(0))
    s = torch.multinomial(logits.softmax(-1).to("tpu"), 50).cpu()
    assert torch.equal(s.sort(-1).values, torch.arange(50).expand(3, 50))


def test_zero_probability_categories_come_last_when_asked_for(native_in_each_eager_mode):
    probs = torch.tensor([0.5, 0.0, 0.0, 0.5])
    for s in (torch.multinomial(probs, 3), torch.multinomial(probs.to("tpu"), 3).cpu()):  # the CPU's rule, and ours
        assert sorted(s[:2].tolist()) == [0, 3] and s[2].item() in (1, 2)


def test_the_seed_reproduces_the_draws(native_in_each_eager_mode):
    probs = torch.rand(4, 30, generator=torch.Generator().manual_seed(1)).to("tpu")
    torch.tpu.manual_seed(7)
    a = torch.multinomial(probs, 5).cpu()
    torch.tpu.manual_seed(7)
    b = torch.multinomial(probs, 5).cpu()
    assert torch.equal(a, b)
    out = torch.empty(4, 3, dtype=torch.int64, device="tpu")
    torch.multinomial(probs, 3, replacement=True, out=out)
    assert ((out.cpu() >= 0) & (out.cpu() < 30)).all()


@pytest.mark.parametrize("probs,n,replacement,message", [
    ([0.5, -0.1], 1, True, "element < 0"),
    ([0.5, float("nan")], 1, True, "`inf`, `nan` or element < 0"),
    ([0.0, 0.0], 1, True, r"sum of probabilities <= 0"),
    ([0.5, 0.5], 3, False, "cannot sample n_sample > prob_dist.size"),
])
def test_argument_errors_match_the_cpus(native_in_each_eager_mode, probs, n, replacement, message):
    with pytest.raises(RuntimeError, match=message):
        torch.multinomial(torch.tensor(probs), n, replacement)  # the CPU's own message
    with pytest.raises(RuntimeError, match=message):
        torch.multinomial(torch.tensor(probs).to("tpu"), n, replacement)
