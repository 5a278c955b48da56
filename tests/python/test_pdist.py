"""torch.pdist on the chip (vtpu/pdist.py) against the CPU, forward and gradient, for every p
OpInfo samples (0, 1, 2, 10, inf and the default), single rows and columns, equal rows (a zero
distance: a zero gradient, not NaN) and an empty pair list, in both eager modes with no CPU op."""
import math

import pytest
import torch
import torch.nn.functional as F
from cpu_comparison import assert_matches_cpu

pytestmark = pytest.mark.usefixtures("native_in_each_eager_mode")


@pytest.mark.parametrize("p", [2.0, 0.0, 1.0, 1.5, 10.0, math.inf])
@pytest.mark.parametrize("shape", [(5, 5), (7, 3), (5, 1), (1, 5)])
def test_pdist_and_its_gradient_match_the_cpu(p, shape):
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(len(shape) + shape[0]))
    assert_matches_cpu(lambda t: F.pdist(t, p), x)


def test_equal_rows_have_zero_distance_and_zero_gradient():
    x = torch.tensor([[1.0, 2, 3], [1, 2, 3], [0, -1, 4]])
    assert_matches_cpu(lambda t: F.pdist(t), x)
    y = x.to("tpu").requires_grad_()
    F.pdist(y).sum().backward()
    assert not y.grad.isnan().any()
