"""Ops whose result size only the data gives (torch_bridge/csrc/aten/masked.cc): x[mask] over
any dims, masked_select (broadcast masks too), torch.nonzero and one-argument torch.where,
against the CPU with the fallback off, in both modes; the count is read from the chip, the
compaction and gathers run there (kernels/compose/compaction.h). torch.nonzero_static needs no
count: it is recorded like any op of fixed shape."""
import pytest
import torch

import vtpu


@pytest.fixture(autouse=True)
def chip(no_fallback):
    yield


def gen(seed):
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("mode", ["strict_eager", "defer_and_fuse"])
@pytest.mark.parametrize("mask_shape,density", [((4, 6), 0.5), ((4, 6, 3), 0.3), ((200, 7), 0.9), ((5,), 0.0)])
def test_boolean_mask_indexing(mode, mask_shape, density):
    vtpu.set_mode(mode)
    x = torch.randn(*mask_shape, 3, generator=gen(1)) if len(mask_shape) < 3 else torch.randn(*mask_shape, generator=gen(1))
    mask = torch.rand(*mask_shape, generator=gen(2)) < density
    got = x.to("tpu")[mask.to("tpu")]
    assert got.shape == x[mask].shape and torch.equal(got.cpu(), x[mask])
    assert vtpu.stats()["cpu_fallback_ops"] == 0


@pytest.mark.parametrize("mode", ["strict_eager", "defer_and_fuse"])
def test_nonzero_masked_select_and_where(mode):
    vtpu.set_mode(mode)
    x = torch.randn(3, 5, 4, generator=gen(3))
    t = x.to("tpu")
    assert torch.equal(torch.nonzero(t > 0.5).cpu(), torch.nonzero(x > 0.5))
    assert torch.equal(torch.nonzero(torch.relu(t)).cpu(), torch.nonzero(torch.relu(x)))  # a float input: != 0
    assert torch.equal(torch.masked_select(t, t < 0).cpu(), torch.masked_select(x, x < 0))
    row_mask = torch.tensor([True, False, True, False, True])[:, None]  # broadcast over the last dim
    assert torch.equal(torch.masked_select(t, row_mask.to("tpu")).cpu(), torch.masked_select(x, row_mask))
    for got, want in zip(torch.where(t > 1), torch.where(x > 1)):
        assert torch.equal(got.cpu(), want)
    assert vtpu.stats()["cpu_fallback_ops"] == 0


@pytest.mark.parametrize("mode", ["strict_eager", "defer_and_fuse"])
def test_masks_over_inner_dims(mode):
    """x[:, mask] and x[:, :, mask]: the selected elements' dim stays where the mask was."""
    vtpu.set_mode(mode)
    x = torch.randn(3, 5, 4, generator=gen(6))
    for index in ((slice(None), torch.tensor([True, False, True, True, False])),
                  (slice(None), torch.rand(5, 4, generator=gen(7)) > 0.5),
                  (slice(None), slice(None), torch.tensor([True, False, False, True]))):
        on_chip = tuple(i.to("tpu") if isinstance(i, torch.Tensor) else i for i in index)
        assert torch.equal(x.to("tpu")[on_chip].cpu(), x[index])
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def test_int64_rows_keep_every_word():
    ids = torch.randint(-2**40, 2**40, (6, 4), generator=gen(4))
    mask = torch.tensor([True, False, True, True, False, True])
    assert torch.equal(ids.to("tpu")[mask.to("tpu")].cpu(), ids[mask])
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def test_prod_backward_runs_on_the_chip():
    """torch's prod backward looks for zeros with nonzero."""
    x = torch.rand(3, 4, generator=gen(5)) + 0.5

    def grad(device):
        y = x.to(device).requires_grad_()
        y.prod(1).sum().backward()
        return y.grad.cpu()

    torch.testing.assert_close(grad("tpu"), grad("cpu"), rtol=1e-5, atol=1e-6)
    assert vtpu.stats()["cpu_fallback_ops"] == 0


@pytest.mark.parametrize("shape,density,size,fill", [((2, 2), 0.6, 5, -7), ((3,), 0.5, 1, -1), ((4, 5, 6), 0.3, 10, -1),
                                                     ((4, 5, 6), 0.3, 200, 3), ((3, 4), 0.0, 2, -1), ((7,), 1.0, 7, 0),
                                                     ((2, 3), 0.5, 0, -1), ((), 1.0, 3, -1)])
def test_nonzero_static_pads_with_the_fill_value_and_never_synchronises(shape, density, size, fill):
    """The first `size` coordinates, then rows of fill_value: the compaction keeps the first `size`
    true elements (kernels/compose/compaction.h first_true_positions), and nothing is read back:
    in defer_and_fuse the op flushes nothing."""
    mask = torch.rand(shape, generator=gen(9)) < density
    x = torch.where(mask, torch.randn(shape, generator=gen(10)), 0.0).to("tpu")
    vtpu.synchronize()
    vtpu.reset_stats()
    got = torch.nonzero_static(x, size=size, fill_value=fill)
    assert vtpu.stats()["flushes"] == 0
    assert got.dtype == torch.int64 and got.shape == (size, len(shape))
    assert torch.equal(got.cpu(), torch.nonzero_static(x.cpu(), size=size, fill_value=fill))
    assert vtpu.stats()["cpu_fallback_ops"] == 0
