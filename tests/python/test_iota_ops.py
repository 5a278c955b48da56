"""Ops built on the chip's iota (torch_bridge/csrc/aten/iota.cc): arange in every chip dtype and
int64 (as int32 word pairs), tril/triu masks, argmax/argmin (int64 indices, ties and NaN as
torch has them); all with the CPU fallback off, against the CPU."""
import pytest
import torch

import vtpu


@pytest.fixture(autouse=True)
def stays_on_the_chip(no_fallback):
    yield
    assert vtpu.stats()["cpu_fallback_ops"] == 0


@pytest.mark.parametrize("mode", ["strict_eager", "defer_and_fuse"])
@pytest.mark.parametrize("args", [(10,), (2, 17, 3), (-5, 5), (7, -8, -3), (0, 3000)])
@pytest.mark.parametrize("dtype", [None, torch.int32, torch.float32, torch.bfloat16])
def test_arange_matches_cpu(args, dtype, mode):
    vtpu.set_mode(mode)
    got = torch.arange(*args, dtype=dtype, device="tpu")
    want = torch.arange(*args, dtype=dtype)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert torch.equal(got.cpu(), want)  # integer-valued: exact in every dtype
    vtpu.set_mode("defer_and_fuse")


def test_arange_with_a_fractional_step():
    # element i = start + i * step in f32 (torch computes in double, then rounds): within an ulp
    torch.testing.assert_close(torch.arange(0, 1, 0.1, device="tpu").cpu(), torch.arange(0, 1, 0.1), atol=1e-7, rtol=1e-6)


def test_int64_arange_as_word_pairs_and_its_limit():
    positions = torch.arange(6, device="tpu")
    assert positions.dtype == torch.int64
    assert positions.view(2, 3).cpu().tolist() == [[0, 1, 2], [3, 4, 5]]
    with pytest.raises(NotImplementedError, match="arange.start_out.*int32"):
        torch.arange(2**31, 2**31 + 4, device="tpu")


@pytest.mark.parametrize("diagonal", [-2, 0, 1, 5])
def test_tril_triu_match_cpu(diagonal):
    x = torch.randn(2, 6, 9)
    assert torch.equal(torch.tril(x.to("tpu"), diagonal).cpu(), torch.tril(x, diagonal))
    assert torch.equal(torch.triu(x.to("tpu"), diagonal).cpu(), torch.triu(x, diagonal))
    causal = torch.ones(7, 7, dtype=torch.bool)
    assert torch.equal(torch.tril(causal.to("tpu"), diagonal).cpu(), torch.tril(causal, diagonal))


@pytest.mark.parametrize("dim", [None, 0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_argmax_argmin_match_cpu_with_ties_and_nan(dim, keepdim):
    x = (torch.randn(4, 6, 33) * 2).round()  # ties
    x[1, 2, 5] = float("nan")
    x[3, 4] = 1.0
    for op in (torch.argmax, torch.argmin):
        got, want = op(x.to("tpu"), dim, keepdim), op(x, dim, keepdim)
        assert got.dtype == torch.int64 and got.shape == want.shape
        assert torch.equal(got.cpu(), want), op


def test_greedy_decoding_step_stays_on_the_chip():
    logits = torch.randn(2, 50)
    assert torch.equal(logits.to("tpu").argmax(-1).cpu(), logits.argmax(-1))


def test_max_min_over_a_dim_and_overall():
    x = (torch.randn(4, 6, 5) * 2).round()
    x[2, 3, 1] = float("nan")
    for op in (torch.max, torch.min):
        for dim, keepdim in [(0, False), (2, True), (-2, False)]:
            values, indices = op(x.to("tpu"), dim, keepdim)
            want_values, want_indices = op(x, dim, keepdim)
            torch.testing.assert_close(values.cpu(), want_values, equal_nan=True)
            assert torch.equal(indices.cpu(), want_indices)
        finite = x.nan_to_num()
        assert op(finite.to("tpu")).item() == op(finite).item()
