"""F.ctc_loss on the chip (vtpu/ctc_loss.py): the loss and both gradients (through log_softmax, as
models use it, and with respect to log_probs themselves, where the CPU's kernel returns the
logits' gradient) against the CPU's kernels, over padded and concatenated targets, tensor and
list lengths, repeated labels (no skip between equal labels), empty targets, every reduction,
and infeasible targets with and without zero_infinity."""
import random

import pytest
import torch
import torch.nn.functional as F

pytestmark = pytest.mark.usefixtures("native_in_each_eager_mode")


def _loss_and_gradients(device, x, targets, input_lengths, target_lengths, **kwargs):
    xd = x.to(device).requires_grad_()
    loss = F.ctc_loss(xd.log_softmax(2), targets.to(device), input_lengths, target_lengths, **kwargs)
    (logits_grad,) = torch.autograd.grad(loss.sum(), xd)
    lp = x.to(device).log_softmax(2).detach().requires_grad_()
    (lp_grad,) = torch.autograd.grad(F.ctc_loss(lp, targets.to(device), input_lengths, target_lengths, **kwargs).sum(), lp)
    return loss.detach().cpu(), logits_grad.cpu(), lp_grad.cpu()


CASES = [  # T, N, C, longest target, concatenated, reduction, zero_infinity, lengths as tensors, one repeated label
    (10, 3, 5, 3, False, "mean", False, True, False),
    (30, 4, 7, 6, True, "sum", False, True, False),
    (12, 2, 4, 5, False, "none", True, True, False),
    (20, 3, 6, 4, False, "mean", False, False, False),
    (16, 3, 4, 4, False, "mean", False, True, True),
]


@pytest.mark.parametrize("case", CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_ctc_loss_and_gradients_match_the_cpus(case):
    T, N, C, S, concatenated, reduction, zero_infinity, as_tensors, repeated = case
    rng = random.Random(T * N)
    torch.manual_seed(T)
    target_lengths = [rng.randint(0 if zero_infinity else 1, S) for _ in range(N)]
    input_lengths = [rng.randint(min(2 * t + 1, T), T) for t in target_lengths]
    targets = torch.full((N, S), 2) if repeated else torch.randint(1, C, (N, S))
    if concatenated:
        targets = torch.cat([targets[b, :target_lengths[b]] for b in range(N)])
    x = torch.randn(T, N, C)
    results = {}
    for device in ("cpu", "tpu"):
        lengths = (torch.tensor(input_lengths, device=device), torch.tensor(target_lengths, device=device)) if as_tensors \
            else (input_lengths, target_lengths)
        results[device] = _loss_and_gradients(device, x, targets, *lengths, reduction=reduction, zero_infinity=zero_infinity)
    torch.testing.assert_close(results["tpu"], results["cpu"], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("zero_infinity", [False, True])
def test_an_infeasible_target_gives_an_infinite_loss_or_zero(zero_infinity):
    # Five labels cannot align with three frames: the loss is inf (its gradient NaN), or 0 with a
    # zero gradient under zero_infinity; the feasible entry beside it is unaffected.
    x = torch.randn(3, 2, 5)
    targets = torch.tensor([[1, 2, 3, 4, 1], [1, 2, 0, 0, 0]])
    results = {device: _loss_and_gradients(device, x, targets, torch.tensor([3, 3], device=device),
                                           torch.tensor([5, 2], device=device), reduction="none", zero_infinity=zero_infinity)
               for device in ("cpu", "tpu")}
    torch.testing.assert_close(results["tpu"], results["cpu"], atol=1e-5, rtol=1e-5, equal_nan=True)
    assert results["tpu"][0][0].item() == (0.0 if zero_infinity else float("inf"))
