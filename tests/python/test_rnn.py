"""nn.LSTM, nn.GRU and their cells on tpu (the fused cells torch routes accelerator tensors to,
with no CPU kernel to fall back on): multi-layer, bidirectional, batch-first and packed sequences,
forward and backward against the CPU in every mode, with no CPU op."""
import copy

import pytest
import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

import vtpu


pytestmark = pytest.mark.usefixtures("native_in_each_eager_mode")


def compare(module, *inputs, atol=2e-6):
    chip = copy.deepcopy(module).to("tpu")
    results = {}
    for device, m in (("cpu", module), ("tpu", chip)):
        xs = [x.detach().to(device).requires_grad_(x.is_floating_point()) for x in inputs]
        out = m(*xs)
        first = out[0] if isinstance(out, tuple) else out
        weights = torch.linspace(-1, 1, first.numel()).view(first.shape).to(device)
        (first * weights).sum().backward()
        results[device] = [first.detach().cpu()] + [x.grad.cpu() for x in xs if x.requires_grad] + \
                          [p.grad.cpu() for p in m.parameters()]
    torch.testing.assert_close(results["tpu"], results["cpu"], atol=atol, rtol=1e-5)


@pytest.mark.parametrize("cls", [torch.nn.LSTM, torch.nn.GRU])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_multi_layer_rnn_matches_the_cpu(cls, bidirectional):
    torch.manual_seed(0)
    compare(cls(5, 7, num_layers=2, bidirectional=bidirectional, batch_first=True), torch.randn(3, 4, 5))


@pytest.mark.parametrize("cls,bias", [(torch.nn.LSTMCell, True), (torch.nn.GRUCell, True), (torch.nn.GRUCell, False)])
def test_cells_match_the_cpu(cls, bias):
    torch.manual_seed(1)
    compare(cls(6, 4, bias=bias), torch.randn(3, 6))


def test_lstm_with_initial_state_and_both_state_gradients():
    torch.manual_seed(2)
    lstm = torch.nn.LSTM(4, 3)
    x, h, c = torch.randn(5, 2, 4), torch.randn(1, 2, 3), torch.randn(1, 2, 3)

    class WithState(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = lstm

        def forward(self, x, h, c):
            out, (hn, cn) = self.lstm(x, (h, c))
            return out.sum(-1, keepdim=True) + hn.sum() + 2 * cn.sum()

    compare(WithState(), x, h, c)


def test_packed_sequences():
    torch.manual_seed(3)
    gru = torch.nn.GRU(3, 4, batch_first=True)
    x, lengths = torch.randn(3, 5, 3), torch.tensor([5, 3, 2])

    class Packed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gru = gru

        def forward(self, x):
            packed = pack_padded_sequence(x, lengths, batch_first=True)
            out, _ = self.gru(packed)
            return pad_packed_sequence(out, batch_first=True)[0]

    compare(Packed(), x)
