"""torch.cumsum on the chip (torch_bridge/csrc/aten/cumsum.cc, kernels/compose/cumsum.h: a matmul with a
triangular matrix of ones, rows past 2048 in blocks): float dims and dtypes against the CPU;
integer scans (byte planes, exact) into int32 over the whole int32 range, wrapping as torch does,
and into int64 from any integer input (position ids from an attention mask, in f32 when the sums
stay below 2^24; int64 by its eight byte planes); rows of any length."""

import pytest
import torch

import vtpu


@pytest.fixture(autouse=True)
def chip(no_fallback):
    yield


@pytest.mark.parametrize("mode", ["strict_eager", "defer_and_fuse"])
@pytest.mark.parametrize("shape,dim", [((1,), 0), ((7,), 0), ((3, 129), 1), ((129, 3), 0), ((2, 7, 5), 1), ((4, 1000), -1)])
def test_float_cumsum_matches_the_cpu(mode, shape, dim):
    vtpu.set_mode(mode)
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(1))
    got = torch.cumsum(x.to("tpu"), dim).cpu()
    # the MXU sums in another order than torch's left-to-right: f32 rounding of partial sums of
    # up to 1000 terms of magnitude <= 4 (|sum| < 200, ulp 1.5e-5)
    torch.testing.assert_close(got, x.cumsum(dim), atol=2e-5, rtol=1e-5)
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def test_out_and_in_place_forms():
    x = torch.randn(4, 9, generator=torch.Generator().manual_seed(4))
    out = torch.empty(4, 9, device="tpu")
    torch.cumsum(x.to("tpu"), 1, out=out)
    y = x.to("tpu")
    y.cumsum_(0)
    torch.testing.assert_close(out.cpu(), x.cumsum(1), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(y.cpu(), x.cumsum(0), atol=1e-5, rtol=1e-5)
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def test_bf16_is_scanned_in_f32_and_rounded_once():
    x = torch.randn(3, 50, dtype=torch.bfloat16, generator=torch.Generator().manual_seed(2))
    got = x.to("tpu").cumsum(1).cpu()
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got.float(), x.float().cumsum(1).bfloat16().float(), atol=0, rtol=0)


def test_position_ids_from_an_attention_mask_stay_on_the_chip():
    mask = torch.tensor([[0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 0, 1]])
    got = mask.to("tpu").cumsum(-1) - 1
    assert got.dtype == torch.int64
    assert torch.equal(got.cpu(), mask.cumsum(-1) - 1)
    flags = torch.rand(4, 300, generator=torch.Generator().manual_seed(3)) > 0.5
    assert torch.equal(flags.to("tpu").cumsum(1).cpu(), flags.cumsum(1))
    assert vtpu.stats()["cpu_fallback_ops"] == 0


@pytest.mark.parametrize("mode", ["strict_eager", "defer_and_fuse"])
@pytest.mark.parametrize("shape,dim", [((1,), 0), ((7,), 0), ((5, 129), 1), ((129, 3), 0), ((2, 7, 5), 1)])
def test_int32_cumsum_is_exact_and_wraps_as_torch(mode, shape, dim):
    vtpu.set_mode(mode)
    x = torch.randint(-(2**31), 2**31 - 1, shape, dtype=torch.int32, generator=torch.Generator().manual_seed(5))
    x.view(-1)[:3] = torch.tensor([2**31 - 1, 2**31 - 1, -(2**31)], dtype=torch.int32)[: x.numel()]
    got = torch.cumsum(x.to("tpu"), dim, dtype=torch.int32).cpu()
    assert got.dtype == torch.int32
    assert torch.equal(got, torch.cumsum(x, dim, dtype=torch.int32))  # sums past 2^31 wrap
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def test_moe_offsets_from_expert_counts_stay_on_the_chip():
    # transformers' grouped-mm experts: histc of the routed expert ids, then int32 offsets
    experts = torch.randint(0, 8, (64, 2), generator=torch.Generator().manual_seed(6)).int()
    counts = torch.histc(experts.to("tpu"), bins=8, min=0, max=7)
    offsets = torch.cumsum(counts, dim=0, dtype=torch.int32)
    want = torch.cumsum(torch.histc(experts.float(), bins=8, min=0, max=7).int(), dim=0, dtype=torch.int32)
    assert torch.equal(offsets.cpu(), want)
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def test_int64_results_up_to_2_to_the_31():
    x = torch.full((2, 300), 1 << 22, dtype=torch.int64)  # partial sums past 2^24, below 2^31
    x[1] = -(1 << 22)
    assert torch.equal(x.to("tpu").cumsum(1).cpu(), x.cumsum(1))
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def test_int64_sums_past_2_to_the_31_scan_exactly_on_the_words():
    # any int64 and int32 values: eight byte planes scanned, recombined modulo 2^64 as torch's
    big = torch.full((2, 4), 1 << 29, dtype=torch.int64)
    assert torch.equal(big.to("tpu").cumsum(1).cpu(), big.cumsum(1))
    g = torch.Generator().manual_seed(3)
    huge = torch.randint(-(2**62), 2**62, (3, 40), generator=g)
    huge[0, :2] = 2**63 - 1  # wraps, as on the CPU
    words = torch.randint(-(2**31), 2**31 - 1, (3, 40), generator=g, dtype=torch.int32)
    for t in (huge, words):
        assert torch.equal(t.to("tpu").cumsum(1).cpu(), t.cumsum(1))
        assert torch.equal(t.to("tpu").cumsum(0).cpu(), t.cumsum(0))
    assert vtpu.stats()["cpu_fallback_ops"] == 0


@pytest.mark.parametrize("length", [2049, 70000])
def test_rows_longer_than_a_scan_block_are_scanned_in_blocks(length):
    """Past 2048 elements a row is scanned in blocks of 2048 (the last zero-padded), each offset by
    the scan of the blocks' totals: floats, infinities and NaN as the CPU's running sum has them,
    along the last dim and another; masks and int8 values into exact int64 (one f32 scan: their
    partial sums stay below 2^24). Before, a row past about 46,000 was refused ("too large for
    one launch": the triangle of ones was n x n), and an integer one past 65,793."""
    g = torch.Generator().manual_seed(7)
    x = torch.randn(3, length, generator=g)
    x[1, length // 3] = float("inf")
    x[2, length // 4], x[2, length // 2] = float("inf"), float("-inf")  # NaN from there on
    x[0, length - 5] = float("nan")
    torch.testing.assert_close(x.to("tpu").cumsum(1).cpu(), x.cumsum(1), atol=1e-3, rtol=1e-5, equal_nan=True)
    column = x[:2].t().contiguous()
    torch.testing.assert_close(column.to("tpu").cumsum(0).cpu(), column.cumsum(0), atol=1e-3, rtol=1e-5, equal_nan=True)
    mask = torch.rand(3, length, generator=g) > 0.3
    assert torch.equal(mask.to("tpu").cumsum(1).cpu(), mask.cumsum(1))
    small = torch.randint(-128, 128, (2, length), dtype=torch.int8, generator=g)
    assert torch.equal(small.to("tpu").cumsum(1).cpu(), small.cumsum(1))
    assert vtpu.stats()["cpu_fallback_ops"] == 0
