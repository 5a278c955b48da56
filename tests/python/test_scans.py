"""cummax and cummin as doubling scans on the chip (vtpu/scans.py), against the CPU's values and
indices exactly: ties (the later index wins), NaN (the latest NaN wins), infinities, integers at
any int64 magnitude, bool, 0-d and empty inputs, every dim, and the gradient, in both eager modes
with no CPU op. logcumsumexp by the same scan: values within f32 rounding of the CPU's (infinities
and NaN where the CPU's), and a gradient against float64's, closer than the CPU's own formula."""
import math

import pytest
import torch

pytestmark = pytest.mark.usefixtures("native_in_each_eager_mode")

INPUTS = {
    "float ties": torch.tensor([[1.0, 3, 3, 2, 3, -1, 5, 5], [0, 0, 0, -2, -2, 7, 7, 1]]),
    "NaN and infinities": torch.tensor([[1.0, math.nan, 2, math.nan, 5, -math.inf, math.inf, 0]]),
    "random": torch.randn(3, 5, 70, generator=torch.Generator().manual_seed(0)),
    "bfloat16": torch.randn(4, 33, generator=torch.Generator().manual_seed(1)).bfloat16(),
    "int32": torch.randint(-4, 4, (3, 40), generator=torch.Generator().manual_seed(2), dtype=torch.int32),
    "int64 beyond 2^53": torch.tensor([[5, 2**62, -(2**63), 2**53 + 1, 2**63 - 1, 3]]),
    "bool": torch.tensor([[False, True, False, True], [False, False, False, True]]),
    "0-d": torch.tensor(2.5),
    "empty": torch.empty(3, 0),
}


@pytest.mark.parametrize("op", [torch.cummax, torch.cummin], ids=["cummax", "cummin"])
@pytest.mark.parametrize("name", INPUTS)
def test_values_and_indices_match_the_cpu(op, name):
    x = INPUTS[name]
    for dim in range(-max(x.dim(), 1), max(x.dim(), 1)):
        values, indices = op(x.to("tpu"), dim)
        want_values, want_indices = op(x, dim)
        assert values.dtype == want_values.dtype and indices.dtype == want_indices.dtype
        torch.testing.assert_close(values.cpu(), want_values, atol=0, rtol=0, equal_nan=True)
        assert torch.equal(indices.cpu(), want_indices), (dim, indices.cpu(), want_indices)


@pytest.mark.parametrize("op", [torch.cummax, torch.cummin], ids=["cummax", "cummin"])
def test_gradient_flows_to_the_selected_elements(op):
    x = torch.tensor([[1.0, 3, 3, 2, 0.5, 4], [2, 1, 1, 5, 5, 0]], requires_grad=True)
    y = x.detach().to("tpu").requires_grad_()
    weights = torch.linspace(-1, 1, x.numel()).reshape(x.shape)
    (op(x, 1)[0] * weights).sum().backward()
    (op(y, 1)[0] * weights.to("tpu")).sum().backward()
    assert torch.equal(y.grad.cpu(), x.grad)


LOG_INPUTS = {
    "random": torch.randn(3, 5, 70, generator=torch.Generator().manual_seed(3)) * 4,
    "spread beyond exp's range": torch.tensor([[-200.0, 0, -150, 90, 95, -300, 1e4, 3]]),
    "NaN and infinities": torch.tensor([[-math.inf, -math.inf, 1, math.inf, 2], [0, math.nan, 3, 4, -math.inf]]),
    "bfloat16": torch.randn(4, 33, generator=torch.Generator().manual_seed(4)).bfloat16(),
    "0-d": torch.tensor(2.5),
    "empty": torch.empty(3, 0),
}


@pytest.mark.parametrize("name", LOG_INPUTS)
def test_logcumsumexp_matches_the_cpu(name):
    x = LOG_INPUTS[name]
    for dim in range(-max(x.dim(), 1), max(x.dim(), 1)):
        got, want = torch.logcumsumexp(x.to("tpu"), dim).cpu(), torch.logcumsumexp(x, dim)
        assert got.dtype == want.dtype
        torch.testing.assert_close(got, want, equal_nan=True)
    with torch.inference_mode():  # no autograd key: aten::_logcumsumexp itself
        torch.testing.assert_close(torch.logcumsumexp(x.to("tpu"), -1).cpu(), torch.logcumsumexp(x, -1), equal_nan=True)


def test_logcumsumexp_gradient_is_closer_to_float64_than_the_cpus():
    """Large inputs (OpInfo's samples reach 1e4): torch's formula cancels exponentiated sums of the
    input's size; the chip's gradient goes through the scan's logaddexp steps."""
    x = torch.randn(5, 5, 5, generator=torch.Generator().manual_seed(5)) * 3000
    g = torch.randn(5, 5, 5, generator=torch.Generator().manual_seed(6))
    x64 = x.double().requires_grad_()
    want, = torch.autograd.grad(torch.logcumsumexp(x64, 1), x64, g.double())
    cpu_x = x.clone().requires_grad_()
    cpu, = torch.autograd.grad(torch.logcumsumexp(cpu_x, 1), cpu_x, g)
    chip_x = x.to("tpu").requires_grad_()
    chip, = torch.autograd.grad(torch.logcumsumexp(chip_x, 1), chip_x, g.to("tpu"))
    chip_error = (chip.cpu().double() - want).abs().max().item()
    assert chip_error < 1e-5 * want.abs().max().item()
    assert chip_error < (cpu.double() - want).abs().max().item()
    small = torch.randn(3, 40, generator=torch.Generator().manual_seed(7))  # well conditioned: both agree
    torch.testing.assert_close(*(torch.autograd.grad(torch.logcumsumexp(t, 1).sum(), t)[0].cpu()
                                 for t in (small.to("tpu").requires_grad_(), small.clone().requires_grad_())))
