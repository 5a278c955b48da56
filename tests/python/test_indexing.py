"""x[idx] with one integer index tensor on the chip (torch_bridge/csrc/aten/lowered.cc tpu_index:
a gather of the indexed dim, negative indices counting from the end, checked on the chip): any
position of the index among the dims, multi-dim indices, CPU indices, both modes; what falls back."""
import warnings

import pytest
import torch

import vtpu


@pytest.fixture(autouse=True)
def chip(no_fallback):
    yield


CASES = {
    "first": lambda t, i: t[i],
    "middle": lambda t, i: t[:, i],
    "last": lambda t, i: t[..., i],
    "two_dim_index": lambda t, i: t[:, i.view(2, 2)],
    "index_out_form": lambda t, i: torch.ops.aten.index.Tensor_out(t, [None, i], out=torch.empty(0, device=t.device)),
}


@pytest.mark.parametrize("mode", ["strict_eager", "defer_and_fuse"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_integer_indexing_matches_the_cpu(mode, name):
    vtpu.set_mode(mode)
    x = torch.randn(5, 6, 7, generator=torch.Generator().manual_seed(10))
    i = torch.tensor([0, -1, 3, 2])  # -1: the last
    got = CASES[name](x.to("tpu"), i.to("tpu"))
    assert torch.equal(got.cpu(), CASES[name](x, i))
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def test_indices_on_the_cpu_and_int32_and_bf16_tables():
    x = torch.randn(6, 3, generator=torch.Generator().manual_seed(11)).bfloat16()
    assert torch.equal(x.to("tpu")[torch.tensor([5, -6, 1])].cpu(), x[torch.tensor([5, -6, 1])])
    i32 = torch.tensor([[2, -1], [0, 0]], dtype=torch.int32)
    assert torch.equal(x.to("tpu")[i32.to("tpu")].cpu(), x[i32])
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def test_an_index_out_of_range_is_an_index_error():
    x = torch.randn(4, 2).to("tpu")
    with pytest.raises(IndexError, match="index out of range"):
        x[torch.tensor([1, -5]).to("tpu")].cpu()  # -5 is before the first of 4 rows
    assert torch.equal(x[torch.tensor([3])].cpu(), x.cpu()[3:4])  # the device stays usable


def test_boolean_masks_past_the_old_limit_run_on_the_chip():
    """x[mask] past 2^17 elements (kernels/compose/compaction.h scans rows of 128 level by level now)."""
    x = torch.arange(2**17 + 1, dtype=torch.float32)
    mask = x.remainder(3) == 0
    assert torch.equal(x.to("tpu")[mask.to("tpu")].cpu(), x[mask])
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def test_masks_past_the_compaction_limit_fall_back_with_the_reason():
    """2^24 elements: positions and counts would no longer be exact in f32."""
    mask = torch.zeros(2**24, dtype=torch.bool)
    mask[[5, 2**24 - 1]] = True
    with pytest.raises(NotImplementedError, match="nonzero.*compaction limit"):
        torch.nonzero(mask.to("tpu"))
    vtpu.set_cpu_fallback(True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the one-time fallback warning is tested elsewhere
            assert torch.equal(torch.nonzero(mask.to("tpu")).cpu(), torch.nonzero(mask))
    finally:
        vtpu.set_cpu_fallback(False)


@pytest.mark.parametrize("name", ["ij", "i_k", "_jk", "ijk", "negative"])
def test_several_index_tensors_on_the_chip(name):
    vtpu.set_cpu_fallback(False)  # the index tensors combine into one linear index on the chip
    x = torch.randn(4, 5, 6)
    i, k = torch.tensor([0, 3, -1]), torch.tensor([5, 0, 2])
    forms = {
        "ij": lambda t, dev: t[i.to(dev), torch.tensor([1, 2, 0]).to(dev)],
        "i_k": lambda t, dev: t[i.to(dev), :, k.to(dev)],  # not adjacent: the index dims go first
        "_jk": lambda t, dev: t[:, torch.tensor([[1], [2]]).to(dev), torch.tensor([0, 5]).to(dev)],  # broadcast
        "ijk": lambda t, dev: t[i.to(dev), torch.tensor([1, 2, 0]).to(dev), k.to(dev)],
        "negative": lambda t, dev: t[torch.tensor([-4, -1]).to(dev), torch.tensor([-5, 4]).to(dev)],
    }
    want = forms[name](x, "cpu")
    got = forms[name](x.to("tpu"), "tpu")
    assert got.shape == want.shape and torch.equal(got.cpu(), want)


def test_several_index_tensors_out_of_range_raise_index_error():
    x = torch.randn(4, 5).to("tpu")
    with pytest.raises(IndexError, match="index out of range"):
        x[torch.tensor([0, 4]).to("tpu"), torch.tensor([0, 1]).to("tpu")].cpu()  # 4 would alias row 0 of the next block


@pytest.mark.parametrize("name", ["flip", "flip_all", "roll", "roll_flat"])
def test_flip_and_roll_on_the_chip(name):
    vtpu.set_cpu_fallback(False)
    x = torch.randn(3, 4, 5)
    forms = {"flip": lambda t: t.flip(0, 2), "flip_all": lambda t: t.flip(-1, 0, 1), "roll": lambda t: t.roll((1, -7), (0, 2)),
             "roll_flat": lambda t: t.roll(13)}
    assert torch.equal(forms[name](x.to("tpu")).cpu(), forms[name](x))


def test_strided_int64_views_copy_and_index_on_the_chip(no_fallback):
    """A column of an int64 tensor (stride 2) as an index, and strided int64 copies (a column,
    a transpose, an expand) at magnitudes past 2^31: copied as int32 word pairs on the chip, with
    no bytes through the host."""
    ids = torch.tensor([[0, 3], [2, 1], [1, 0]]).to("tpu")
    table = torch.arange(20.0).reshape(5, 4)
    big = torch.tensor([[2**40, 1], [-(2**62), 2], [7, 3]])
    on_chip = big.to("tpu")
    vtpu.synchronize()
    before = vtpu.stats()
    results = [table.to("tpu").index_select(0, ids[:, 0]), table.to("tpu")[ids[:, 1]], on_chip[:, 0].contiguous(),
               on_chip.t().contiguous(), on_chip[::2, :1].expand(2, 3).contiguous()]
    after = vtpu.stats()
    assert after["device_to_host_bytes"] == before["device_to_host_bytes"]
    assert after["host_to_device_bytes"] - before["host_to_device_bytes"] == 2 * table.nbytes  # the two table moves
    wants = [table[[0, 2, 1]], table[[3, 1, 0]], big[:, 0], big.t(), big[::2, :1].expand(2, 3)]
    for got, want in zip(results, wants):
        assert torch.equal(got.cpu(), want)
