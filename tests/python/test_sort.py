"""torch.sort / argsort on the chip (torch_bridge/csrc/aten/sort.cc, kernels/compose/sort.h) against the
CPU's stable sort with the fallback off: any dim, both directions, ties, NaN and infinities,
bf16, int8, bool and small int64 values, out=, mixture-of-experts routing; long rows (a
vocabulary for top-p sampling) through the bitonic network; 0-d and empty inputs; int64 values
of unknown magnitude fall back naming why."""
import warnings

import pytest
import torch

import vtpu


@pytest.fixture(autouse=True)
def chip(no_fallback):
    yield


def gen(seed):
    return torch.Generator().manual_seed(seed)


def check(x, **kwargs):
    values, indices = torch.sort(x.to("tpu"), stable=True, **kwargs)
    want = torch.sort(x, stable=True, **kwargs)
    assert values.dtype == x.dtype and indices.dtype == torch.int64
    torch.testing.assert_close(values.cpu(), want.values, rtol=0, atol=0, equal_nan=True)  # exact; NaN where torch puts it
    assert torch.equal(indices.cpu(), want.indices), (indices.cpu(), want.indices)


@pytest.mark.parametrize("mode", ["strict_eager", "defer_and_fuse"])
@pytest.mark.parametrize("shape,dim", [((7,), 0), ((3, 129), 1), ((5, 4), 0), ((2, 3, 9), 1), ((1, 1), -1)])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_matches_the_cpu(mode, shape, dim, descending):
    vtpu.set_mode(mode)
    x = torch.randn(*shape, generator=gen(1)).round(decimals=1)  # rounding makes ties
    check(x, dim=dim, descending=descending)
    assert vtpu.stats()["cpu_fallback_ops"] == 0


@pytest.mark.parametrize("descending", [False, True])
def test_nan_infinities_and_zeros_sort_as_torch_has_them(descending):
    inf, nan = float("inf"), float("nan")
    check(torch.tensor([[nan, 1.0, -inf, 0.0, nan, inf, -0.0, 1.0]]), descending=descending)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.int8, torch.bool])
def test_other_dtypes(dtype):
    x = (torch.randn(4, 10, generator=gen(2)) * 50).to(dtype)
    check(x, dim=-1)
    check(x, dim=0, descending=True)
    assert vtpu.stats()["cpu_fallback_ops"] == 0


@pytest.mark.parametrize("descending", [False, True])
def test_int32_of_any_magnitude_sorts_by_its_halves(descending):
    edges = torch.tensor([[70000, -70000, 65535, -1, 0, 65536, -65536, 2**31 - 1, -2**31, 70000, 65535, -65535]],
                         dtype=torch.int32)  # values sharing a low or a high half, and the extremes
    check(edges, descending=descending)
    check(torch.randint(-2**31, 2**31 - 1, (5, 37), generator=gen(5), dtype=torch.int32), dim=0, descending=descending)
    # flex_attention's block masks: argsort of 0/1 int32 rows, descending and stable
    mask = torch.randint(0, 2, (2, 3, 40), generator=gen(6), dtype=torch.int32)
    assert torch.equal(mask.to("tpu").argsort(dim=-1, descending=True, stable=True).cpu(),
                       mask.argsort(dim=-1, descending=True, stable=True))
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def test_moe_routing_sort_stays_on_the_chip():
    """Tokens grouped by expert: top-2 experts per token, flattened, sorted stably by expert id
    (int64 values whose bound the chip knows from topk), then argsort and the token of each slot."""
    logits = torch.randn(8, 4, generator=gen(3))
    experts = logits.to("tpu").topk(2, dim=-1).indices.reshape(-1)
    order = experts.argsort(stable=True)
    sorted_experts = experts.sort(stable=True).values
    want_experts = logits.topk(2, dim=-1).indices.reshape(-1)
    assert torch.equal(order.cpu(), want_experts.argsort(stable=True))
    assert torch.equal(sorted_experts.cpu(), want_experts.sort(stable=True).values)
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def test_out_form_writes_both_tensors():
    x = torch.randn(3, 6, generator=gen(4))
    values, indices = torch.empty(3, 6, device="tpu"), torch.empty(3, 6, dtype=torch.long, device="tpu")
    torch.sort(x.to("tpu"), dim=1, out=(values, indices))
    want = torch.sort(x, dim=1)
    assert torch.equal(values.cpu(), want.values) and torch.equal(indices.cpu(), want.indices)


@pytest.mark.parametrize("mode", ["strict_eager", "defer_and_fuse"])
def test_long_rows_sort_through_the_bitonic_network(mode):
    """Rows past sorting by counting (rows * n^2 > 2^22): a vocabulary of 3000 with ties and a
    NaN, both directions, and top-p sampling's sort -> softmax -> cumsum -> mask -> scatter back."""
    vtpu.set_mode(mode)
    logits = torch.randn(2, 3000, generator=gen(31))
    logits[0, 10:20] = logits[0, 5]  # ties keep position order
    logits[1, 7] = float("nan")
    for descending in (False, True):
        check(logits, dim=-1, descending=descending)
    clean = torch.randn(2, 3000, generator=gen(32))

    def top_p(x, p=0.9):
        ordered, order = torch.sort(x, descending=False)
        probs = ordered.softmax(-1).cumsum(-1)
        drop = probs <= 1 - p
        return x.masked_fill(drop.scatter(1, order, drop), -float("inf"))

    torch.testing.assert_close(top_p(clean.to("tpu")).cpu(), top_p(clean))
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def test_0d_and_empty_inputs_have_nothing_to_order():
    for x in (torch.tensor(2.5), torch.empty(0), torch.empty(3, 0), torch.empty(0, 4, 5)):
        for dim in range(-max(x.dim(), 1), max(x.dim(), 1)):
            check(x, dim=dim)
    with pytest.raises(IndexError, match="Dimension out of range"):
        torch.sort(torch.tensor(1.0, device="tpu"), dim=2)


def test_what_falls_back_says_why():
    vtpu.set_cpu_fallback(True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            values, indices = torch.sort(torch.tensor([2**40, -3, 5]).to("tpu"))  # beyond f32's exact integers
        assert values.cpu().tolist() == [-3, 5, 2**40] and indices.cpu().tolist() == [1, 2, 0]
        assert vtpu.stats()["cpu_fallbacks"].get("aten::sort", 0) == 1
    finally:
        vtpu.set_cpu_fallback(False)
