"""cummax and cummin as doubling scans on the chip (vtpu/scans.py), against the CPU's values and
indices exactly: ties (the later index wins), NaN (the latest NaN wins), infinities, integers at
any int64 magnitude, bool, 0-d and empty inputs, every dim, and the gradient, in both eager modes
with no CPU op."""
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
