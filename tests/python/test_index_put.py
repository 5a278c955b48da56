"""x[index] = values on the chip (torch_bridge/csrc/aten/index_put.cc), against the CPU with the
fallback off: boolean masks with one value (float and int64 tensors), accumulation at integer
indices (repeated and negative ones, broadcast values, the backward of x[idx]), in both modes;
masks with several values or past the first dim (as their true coordinates), masked_scatter and
put_; an empty index, or one naming empty rows, writes nothing (values that cannot broadcast to
its result still raise torch's error); an index outside the rows raises IndexError; what stays on the CPU says why."""
import warnings

import pytest
import torch

import vtpu


@pytest.fixture(autouse=True)
def chip(no_fallback):
    yield


def gen(seed):
    return torch.Generator().manual_seed(seed)


def put(x, indices, values, accumulate=False):
    """index_put_ on a copy of x on tpu (indices and values moved there when they are tensors
    with more than one element; 0-d values stay on the host, as Python numbers do) and on the CPU."""
    on_chip = lambda t: t.to("tpu") if isinstance(t, torch.Tensor) and t.dim() > 0 else t
    got = x.to("tpu").index_put_(tuple(on_chip(i) for i in indices), on_chip(values), accumulate)
    want = x.clone().index_put_(tuple(indices), values, accumulate)
    return got.cpu(), want


@pytest.mark.parametrize("mode", ["strict_eager", "defer_and_fuse"])
def test_mask_of_the_full_shape_and_of_leading_dims(mode):
    vtpu.set_mode(mode)
    x = torch.randn(4, 6, generator=gen(1))
    full = torch.rand(4, 6, generator=gen(2)) > 0.5
    rows = torch.tensor([True, False, True, False])
    for mask, value in ((full, torch.tensor(0.0)), (rows, torch.tensor(-2.5))):
        got, want = put(x, [mask], value)
        assert torch.equal(got, want)
    got, want = put(x, [full], torch.tensor(1.5), accumulate=True)
    assert torch.equal(got, want)
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def test_python_indexing_with_a_mask_runs_on_the_chip():
    x = torch.randn(3, 5, generator=gen(3))
    t = x.to("tpu")
    t[t < 0] = 0.0
    assert torch.equal(t.cpu(), x.clamp(min=0))
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def test_int64_tensors_under_a_mask_keep_every_word():
    """Input ids masked to a token id (Gemma-style image tokens), with values beyond 32 bits and a
    device int64 value; the int64 copy back into the ids stays on the chip."""
    ids = torch.randint(-2**40, 2**40, (2, 8), generator=gen(4))
    mask = torch.rand(2, 8, generator=gen(5)) > 0.5
    got, want = put(ids, [mask], torch.tensor(7))
    assert got.dtype == torch.int64 and torch.equal(got, want)
    t = ids.to("tpu")
    t[mask.to("tpu")] = torch.tensor([2**35 + 3]).to("tpu")[0]
    want = ids.clone()
    want[mask] = 2**35 + 3
    assert torch.equal(t.cpu(), want)
    assert vtpu.stats()["cpu_fallback_ops"] == 0


@pytest.mark.parametrize("mode", ["strict_eager", "defer_and_fuse"])
@pytest.mark.parametrize("index,values_shape", [([0, 2, 2, -1], (4, 6)), ([[1, 1], [3, -4]], (2, 2, 6)),
                                                ([5, 0, 5], (6,)), ([2], ())])
def test_accumulate_at_integer_indices(mode, index, values_shape):
    """Repeated indices add up in order, negative ones count from the end, values broadcast to
    the indexed rows. The sums run in another order than the CPU's (zeros + values, then x):
    f32 rounding, 1e-6."""
    vtpu.set_mode(mode)
    x = torch.randn(6, 6, generator=gen(6))
    values = torch.randn(values_shape, generator=gen(7))
    got, want = put(x, [torch.tensor(index)], values, accumulate=True)
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def test_backward_of_integer_indexing_runs_on_the_chip():
    x = torch.randn(5, 3, generator=gen(8))
    index = torch.tensor([4, 0, 4, -2])
    weights = torch.randn(4, 3, generator=gen(9))

    def grad(device):
        y = x.to(device).requires_grad_()
        (y[index.to(device)] * weights.to(device)).sum().backward()
        return y.grad.cpu()

    torch.testing.assert_close(grad("tpu"), grad("cpu"), rtol=1e-6, atol=1e-6)
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def test_int64_clone_is_a_chip_copy():
    ids = torch.arange(10).to("tpu")
    vtpu.synchronize()
    before = vtpu.stats()
    copy = ids.clone()
    vtpu.synchronize()
    after = vtpu.stats()
    assert after["kernels_launched"] - before["kernels_launched"] == 1
    assert after["device_to_host_bytes"] == before["device_to_host_bytes"]
    assert torch.equal(copy.cpu(), torch.arange(10))


def test_an_index_past_the_rows_raises():
    x = torch.zeros(3, 2).to("tpu")
    with pytest.raises(IndexError, match="index out of range"):
        x.index_put_((torch.tensor([1, 3]).to("tpu"),), torch.ones(2, 2).to("tpu"), accumulate=True)
        x.cpu()
    with pytest.raises(IndexError, match="index out of range"):
        x = torch.zeros(3, 2).to("tpu")
        x.index_put_((torch.tensor([1, -4]).to("tpu"),), torch.ones(2, 2).to("tpu"))
        x.cpu()
    assert torch.equal(torch.ones(2, device="tpu").cpu(), torch.ones(2))


@pytest.mark.parametrize("accumulate", [False, True])
def test_an_empty_index_writes_nothing(accumulate):
    x = torch.arange(6.0).reshape(3, 2)
    for device in ("cpu", "tpu"):  # made on the device: a move would make the strided one compact
        strided = torch.empty(0, 2, dtype=torch.long, device=device).t()[0]  # as triu_indices(1, 1, 1)'s rows
        assert strided.stride() == (2,)
    for make in (lambda d: torch.empty(0, dtype=torch.long, device=d), lambda d: torch.empty(0, 4, dtype=torch.int32, device=d),
                 lambda d: torch.empty(0, 2, dtype=torch.long, device=d).t()[0]):
        got = x.to("tpu").index_put_((make("tpu"),), torch.ones(2, device="tpu"), accumulate).cpu()
        assert torch.equal(got, x.clone().index_put_((make("cpu"),), torch.ones(2), accumulate))
        if make("cpu").dim() == 1:
            assert torch.equal(x.to("tpu").index_select(0, make("tpu")).cpu(), x.index_select(0, make("cpu")))
    message = r"shape mismatch: value tensor of shape \[3\] cannot be broadcast to indexing result of shape \[0, 2\]"
    for device in ("cpu", "tpu"):
        with pytest.raises(RuntimeError, match=message):
            x.to(device).index_put_((torch.empty(0, dtype=torch.long, device=device),), torch.ones(3, device=device), accumulate)
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def test_an_index_naming_empty_rows_writes_nothing():
    # unfold's backward over an empty batch scatters into a (positions, 0) block
    got, want = put(torch.zeros(3, 0), (torch.tensor([0, 2]),), torch.zeros(2, 0), accumulate=True)
    assert got.shape == want.shape == (3, 0)
    for device in ("cpu", "tpu"):
        with pytest.raises(RuntimeError, match=r"cannot be broadcast to indexing result of shape \[2, 0\]"):
            torch.zeros(3, 0, device=device).index_put_((torch.tensor([0, 2], device=device),),
                                                         torch.zeros(3, 0, device=device))
    x = torch.randn(0, 1, 5, 5).requires_grad_()
    y = x.detach().to("tpu").requires_grad_()
    torch.nn.functional.unfold(y, 2, padding=1).sum().backward()
    assert y.grad.shape == x.shape
    assert vtpu.stats()["cpu_fallback_ops"] == 0


@pytest.mark.parametrize("mode", ["strict_eager", "defer_and_fuse"])
def test_writes_at_integer_indices(mode):
    """x[idx] = v with each row named once (negative indices too), f32 and bf16 rows, and an
    int64 permutation's inverse (inv[perm] = arange), as mixture-of-experts layers build it."""
    vtpu.set_mode(mode)
    x = torch.randn(6, 3, generator=gen(10))
    got, want = put(x, [torch.tensor([4, 0, -1])], torch.randn(3, 3, generator=gen(11)))
    assert torch.equal(got, want)
    got, want = put(x.bfloat16(), [torch.tensor([1, 3])], torch.tensor(2.5, dtype=torch.bfloat16))
    assert torch.equal(got, want)
    perm = torch.randperm(16, generator=gen(12))
    inverse = torch.zeros(16, dtype=torch.long).to("tpu")
    inverse[perm.to("tpu")] = torch.arange(16, device="tpu")
    want = torch.zeros(16, dtype=torch.long)
    want[perm] = torch.arange(16)
    assert torch.equal(inverse.cpu(), want)
    assert vtpu.stats()["cpu_fallback_ops"] == 0
    vtpu.set_mode("defer_and_fuse")


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.int64, torch.bool, torch.int8])
def test_repeated_integer_writes_keep_the_last_on_the_chip(dtype):
    """Which of several writes to a row wins is the CPU's order: the last. Any dtype, int64 values
    past 2^24 too, and several index tensors with repeats (flex_attention's dense block masks)."""
    x = torch.zeros(4, 2, dtype=dtype)
    index = torch.tensor([1, 1, 3, -3])
    values = (torch.arange(8).view(4, 2) * (2**40 if dtype == torch.int64 else 1) + 3).to(dtype)
    got = x.to("tpu").index_put_((index.to("tpu"),), values.to("tpu"))
    assert torch.equal(got.cpu(), x.clone().index_put_((index,), values))
    dense = torch.zeros(3, 5, dtype=dtype)
    rows, cols = torch.arange(3).unsqueeze(-1), torch.tensor([[0, 4, 4], [2, 2, 4], [4, 4, 4]])
    got = dense.to("tpu")
    got[rows.to("tpu"), cols.to("tpu")] = torch.ones((), dtype=dtype).to("tpu")
    want = dense.clone()
    want[rows, cols] = torch.ones((), dtype=dtype)
    assert torch.equal(got.cpu(), want)
    assert vtpu.stats()["cpu_fallback_ops"] == 0


@pytest.mark.parametrize("name", ["ij", "i_k", "_jk_broadcast", "scalar_value", "accumulate_repeated", "_j", "__k_accumulate"])
def test_index_put_with_several_index_tensors_on_the_chip(name):
    vtpu.set_cpu_fallback(False)  # one linear index into the flattened block, then the one-index path
    torch.manual_seed(5)
    x = torch.randn(4, 5, 6)
    i, k = torch.tensor([0, 3, -1]), torch.tensor([5, 0, 2])
    forms = {
        "ij": ((i, torch.tensor([1, 2, 0])), torch.randn(3, 6), False),
        "i_k": ((i, slice(None), k), torch.randn(3, 5), False),  # not adjacent: index dims first
        "_jk_broadcast": ((slice(None), torch.tensor([[1], [2]]), torch.tensor([0, 5])), torch.randn(4, 2, 2), False),
        "scalar_value": ((slice(None), torch.tensor([1, 2]), torch.tensor([0, 5])), torch.tensor(7.0), False),
        "accumulate_repeated": ((torch.tensor([1, 1, 2]), torch.tensor([3, 3, 0])), torch.randn(3, 6), True),
        # one index tensor past the first dim: x[:, j] = v, and x[..., k] += v (unfold's backward)
        "_j": ((slice(None), torch.tensor([4, 0])), torch.randn(4, 2, 6), False),
        "__k_accumulate": ((slice(None), slice(None), torch.tensor([[1, 5], [1, 1]])), torch.randn(4, 5, 2, 2), True),
    }
    index, values, accumulate = forms[name]
    want, got = x.clone(), x.to("tpu")
    if accumulate:
        as_tensors = lambda ix, device: [  # noqa: E731  (aten's index_put_ takes None for a whole dim)
            None if isinstance(t, slice) else t.to(device) for t in ix]
        torch.ops.aten.index_put_(want, as_tensors(index, "cpu"), values, True)
        torch.ops.aten.index_put_(got, as_tensors(index, "tpu"), values.to("tpu"), True)
    else:
        want[index] = values
        got[tuple(t.to("tpu") if isinstance(t, torch.Tensor) else t for t in index)] = values.to("tpu")
    torch.testing.assert_close(got.cpu(), want, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("mode", ["strict_eager", "defer_and_fuse"])
def test_masks_with_several_values_become_their_true_coordinates(mode):
    """torch's expandTensors on the chip: a mask over k dims is nonzero's k coordinate columns (its
    count read back), then the several-index path: values per true position or broadcast, masks
    past the first dim, accumulation, and a mask with no true position writing nothing."""
    vtpu.set_mode(mode)
    x = torch.randn(4, 5, 6, generator=gen(11))
    rows = torch.tensor([True, False, True, True])
    plane = torch.rand(4, 5, generator=gen(12)) > 0.5
    columns = torch.tensor([False, True, True, False, True])
    count = int(plane.sum())
    cases = [((rows,), torch.randn(3, 5, 6, generator=gen(13)), False),
             ((rows,), torch.randn(6, generator=gen(14)), False),  # broadcast over the selected rows
             ((plane,), torch.randn(count, 6, generator=gen(15)), False),  # a mask over two dims
             ((rows,), torch.randn(3, 5, 6, generator=gen(16)), True),
             ((torch.zeros(4, dtype=torch.bool),), torch.zeros(0, 5, 6), False)]
    for indices, values, accumulate in cases:
        got, want = put(x, list(indices), values, accumulate)
        assert torch.equal(got, want)
    t, c, values = x.to("tpu"), x.clone(), torch.randn(4, 3, 6, generator=gen(17))
    t[:, columns.to("tpu")] = values.to("tpu")  # a mask past the first dim
    c[:, columns] = values
    assert torch.equal(t.cpu(), c)
    assert vtpu.stats()["cpu_fallback_ops"] == 0


@pytest.mark.parametrize("mode", ["strict_eager", "defer_and_fuse"])
def test_masked_scatter_and_put(mode):
    vtpu.set_mode(mode)
    x = torch.randn(4, 5, generator=gen(16))
    mask = torch.rand(5, generator=gen(17)) > 0.4  # broadcast over the rows
    source = torch.arange(40.0).view(8, 5)
    assert torch.equal(x.to("tpu").masked_scatter(mask.to("tpu"), source.to("tpu")).cpu(), x.masked_scatter(mask, source))
    index, values = torch.tensor([0, -1, 7, 12]), torch.tensor([1.0, 2.0, 3.0, 4.0])
    for accumulate in (False, True):
        got = x.to("tpu").put_(index.to("tpu"), values.to("tpu"), accumulate).cpu()
        assert torch.equal(got, x.clone().put_(index, values, accumulate))
    strided = x.t()  # a non-contiguous self is written through a contiguous copy
    got = strided.to("tpu").put(index.to("tpu"), values.to("tpu"))
    assert torch.equal(got.cpu(), strided.put(index, values))
    assert vtpu.stats()["cpu_fallback_ops"] == 0
