"""The matrix exponential on the chip (vtpu/matrix_exp.py) against the CPU: norms from tiny
(where torch picks a low degree) to ones needing squarings, a batch whose matrices need
different squaring counts, NaN, 0x0 and 1x1 matrices, the gradient (itself a matrix_exp of a
block matrix), and nn.utils.parametrizations.orthogonal (matrix_exp of a skew matrix) training
natively; in both eager modes with no CPU op."""
import math

import pytest
import torch
from cpu_comparison import assert_matches_cpu

pytestmark = pytest.mark.usefixtures("native_in_each_eager_mode")


def relative_error(got, want):
    return ((got - want).abs().max() / want.abs().max()).item()


@pytest.mark.parametrize("scale", [1e-3, 0.1, 0.5, 2.0, 10.0, 60.0])
def test_matches_the_cpu_at_every_norm(scale):
    a = torch.randn(3, 5, 5, generator=torch.Generator().manual_seed(0)) * scale / 5
    assert relative_error(torch.linalg.matrix_exp(a.to("tpu")).cpu(), torch.linalg.matrix_exp(a)) < 1e-5


def test_a_batch_with_different_squaring_counts_and_special_cases():
    a = torch.stack([torch.eye(4) * 0.01, torch.randn(4, 4, generator=torch.Generator().manual_seed(1)) * 3,
                     torch.diag(torch.tensor([20.0, -3, 1, 0]))])
    got, want = torch.linalg.matrix_exp(a.to("tpu")).cpu(), torch.linalg.matrix_exp(a)
    for g, w in zip(got, want):
        assert relative_error(g, w) < 1e-5
    nan = torch.randn(3, 3, generator=torch.Generator().manual_seed(2))
    nan[1, 2] = math.nan
    assert torch.linalg.matrix_exp(nan.to("tpu")).cpu().isnan().all()
    for shape in [(2, 0, 0), (4, 1, 1)]:
        x = torch.randn(shape, generator=torch.Generator().manual_seed(3))
        torch.testing.assert_close(torch.linalg.matrix_exp(x.to("tpu")).cpu(), torch.linalg.matrix_exp(x))


def test_gradient():
    assert_matches_cpu(torch.matrix_exp, torch.randn(2, 4, 4, generator=torch.Generator().manual_seed(4)), rtol=1e-4, atol=1e-5)


def test_orthogonal_parametrization_trains():
    torch.manual_seed(5)
    layer = torch.nn.utils.parametrizations.orthogonal(torch.nn.Linear(6, 6))
    chip = torch.nn.utils.parametrizations.orthogonal(torch.nn.Linear(6, 6)).to("tpu")
    chip.load_state_dict(layer.state_dict())
    x = torch.randn(3, 6, generator=torch.Generator().manual_seed(6))
    for model, inputs in ((layer, x), (chip, x.to("tpu"))):
        model(inputs).pow(2).sum().backward()
    torch.testing.assert_close(chip.weight.cpu(), layer.weight, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(chip.weight.cpu() @ chip.weight.cpu().T, torch.eye(6), rtol=0, atol=1e-5)
    for p, q in zip(chip.parameters(), layer.parameters()):
        torch.testing.assert_close(p.grad.cpu(), q.grad, rtol=1e-4, atol=1e-5)


def test_large_norms_are_as_accurate_as_the_cpus():
    """Norms near 30 (as OpInfo's samples): four squarings amplify f32 rounding into a 1e5-sized
    result, where the chip's and the CPU's small elements can differ by more than 1e-4 (OpInfo's
    sample does). Compared with float64's instead: the chip's result is within 1e-4 of it
    everywhere, and no further from it than twice the CPU's largest error."""
    x = torch.randn(5, 5, 5, generator=torch.Generator().manual_seed(7)) * 5
    truth = torch.linalg.matrix_exp(x.double())
    chip, cpu = torch.linalg.matrix_exp(x.to("tpu")).cpu().double(), torch.linalg.matrix_exp(x).double()
    assert truth.abs().max() > 1e5
    torch.testing.assert_close(chip, truth, rtol=1e-4, atol=1e-4)
    assert (chip - truth).abs().max() <= 2 * (cpu - truth).abs().max()
