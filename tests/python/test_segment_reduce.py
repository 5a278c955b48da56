"""segment_reduce and its backward on the chip (vtpu/segment_reduce.py) against the CPU's
kernels: every reduction, lengths and offsets, leading and trailing dims, empty segments, an
initial value, ties, NaN, zeros and infinities; and the CPU's checks of lengths when not unsafe."""
import random

import pytest
import torch

REDUCTIONS = ["sum", "mean", "max", "min", "prod"]


def _case(rng, reduce):
    outer = rng.choice([[], [2], [2, 3]])
    lengths = torch.randint(0, 4, (*outer, rng.randint(1, 4)))
    longest = int(lengths.sum(-1).max())
    lengths[..., -1] += longest - lengths.sum(-1)  # every row covers the axis
    data = torch.randn(*outer, longest, *rng.choice([[], [3]]))
    flat = data.view(-1)
    if flat.numel():
        flat[rng.randrange(flat.numel())] = rng.choice([float("nan"), 0.0, float("inf")])
        flat[rng.randrange(flat.numel())] = flat[0]  # a tie for max and min
    return data, lengths, len(outer)


@pytest.mark.usefixtures("native_in_each_eager_mode")
@pytest.mark.parametrize("reduce", REDUCTIONS)
@pytest.mark.parametrize("by", ["lengths", "offsets"])
def test_segment_reduce_and_gradient_match_the_cpus(reduce, by):
    rng = random.Random(REDUCTIONS.index(reduce))
    torch.manual_seed(0)
    for case in range(8):
        data, lengths, axis = _case(rng, reduce)
        bounds = lengths if by == "lengths" else torch.cat([torch.zeros_like(lengths[..., :1]), lengths.cumsum(-1)], -1)
        initial = 0.5 if case % 2 else None
        results = {}
        for device in ("cpu", "tpu"):
            x = data.detach().clone().to(device).requires_grad_()
            out = torch.segment_reduce(x, reduce, axis=axis, initial=initial, **{by: bounds.to(device)})
            (grad,) = torch.autograd.grad(out, x, torch.linspace(-1, 1, out.numel()).reshape(out.shape).to(device))
            results[device] = (out.detach().cpu(), grad.cpu())
        torch.testing.assert_close(results["tpu"], results["cpu"], atol=1e-5, rtol=1e-5, equal_nan=True,
                                   msg=lambda m: f"case {case}, lengths {lengths.tolist()}: {m}")


def test_lengths_that_do_not_cover_the_axis_are_refused_as_on_the_cpu(no_fallback):
    data = torch.randn(5, device="tpu")
    with pytest.raises(RuntimeError, match="lengths contains negative value"):
        torch.segment_reduce(data, "sum", lengths=torch.tensor([6, -1], device="tpu"))
    with pytest.raises(RuntimeError, match="to sum to data.size"):
        torch.segment_reduce(data, "sum", lengths=torch.tensor([2, 2], device="tpu"))
    partial = torch.segment_reduce(data, "sum", lengths=torch.tensor([2, 2], device="tpu"), unsafe=True)
    torch.testing.assert_close(partial.cpu(), torch.stack([data[:2].sum(), data[2:4].sum()]).cpu())
