"""MultiMarginLoss and MultiLabelMarginLoss on the chip (vtpu/margin_losses.py): p, margin, class
weights, every reduction, 1-D inputs, targets ended by -1; losses and input gradients against the
CPU with the fallback off."""
import pytest
import torch
import torch.nn.functional as F

pytestmark = pytest.mark.usefixtures("native_in_each_eager_mode")

X = torch.randn(4, 5, generator=torch.Generator().manual_seed(0))
CLASSES = torch.tensor([1, 0, 4, 2])
LABELS = torch.tensor([[3, 0, -1, 1, 2], [1, -1, 0, 0, 0], [0, 1, 2, 3, 4], [4, 2, 4, -1, -1]])  # 4 listed twice
WEIGHT = torch.rand(5, generator=torch.Generator().manual_seed(1))


def _compare(loss_fn, x, target):
    results = {}
    for device in ("cpu", "tpu"):
        inp = x.to(device).detach().requires_grad_()
        loss = loss_fn(inp, target.to(device), device)
        loss.sum().backward()
        results[device] = (loss.detach().cpu(), inp.grad.cpu())
    torch.testing.assert_close(results["tpu"], results["cpu"])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("p, margin, weighted", [(1, 1.0, False), (2, 0.7, True), (1, 2.0, True)])
def test_multi_margin_loss(reduction, p, margin, weighted):
    def loss(x, y, device):
        weight = WEIGHT.to(device) if weighted else None
        return F.multi_margin_loss(x, y, p=p, margin=margin, weight=weight, reduction=reduction)
    _compare(loss, X, CLASSES)
    _compare(loss, X[0], CLASSES[0])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_multilabel_margin_loss(reduction):
    def loss(x, y, device):
        return F.multilabel_margin_loss(x, y, reduction=reduction)
    _compare(loss, X, LABELS)
    _compare(loss, X[3], LABELS[3])


def test_zero_dimensional_inputs():
    x, y = torch.tensor(0.3), torch.tensor(0)
    _compare(lambda a, t, device: F.multi_margin_loss(a, t), x, y)
    _compare(lambda a, t, device: F.multilabel_margin_loss(a, t), x, y)
