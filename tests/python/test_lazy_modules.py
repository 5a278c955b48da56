"""Lazy modules moved to tpu before their first call stay lazy (torch builds new Parameter objects
when moving to a PrivateUse1 device; vtpu/module_conversion.py keeps them uninitialized) and then
materialize on the chip and compute what the CPU computes with the same weights; tied parameters
stay tied through the move."""
import copy

import pytest
import torch
from torch.nn.parameter import UninitializedParameter

import vtpu


@pytest.mark.parametrize("make,shape", [
    (lambda: torch.nn.LazyLinear(5), (2, 7)),
    (lambda: torch.nn.LazyConv2d(4, 3), (2, 3, 8, 8)),
    (lambda: torch.nn.LazyConvTranspose1d(2, 3), (2, 3, 6)),
    (lambda: torch.nn.LazyBatchNorm1d(), (4, 3)),
])
def test_lazy_module_on_tpu_materializes_at_its_first_call(make, shape):
    vtpu.set_cpu_fallback(False)
    module = make().to("tpu")
    assert isinstance(module.weight, UninitializedParameter) and module.weight.device.type == "tpu"
    x = torch.randn(*shape)
    y = module(x.to("tpu"))
    assert not isinstance(module.weight, UninitializedParameter)
    assert module.weight.device.type == "tpu" and module.weight.dim() >= 1 and module.weight.numel() > 0
    reference = make()
    reference(x)  # materialized, then given the chip's weights
    reference.load_state_dict({k: v.cpu() for k, v in module.state_dict().items()})
    reference.train(module.training)
    torch.testing.assert_close(y.detach().cpu(), make_output(reference, x, module), atol=1e-5, rtol=1e-5)


def make_output(reference, x, module):
    if isinstance(module, torch.nn.modules.batchnorm._BatchNorm):
        # batch norm's first call updated the running statistics the chip's state now holds; the
        # output of the first call depends only on the batch
        return torch.nn.functional.batch_norm(x, None, None, reference.weight, reference.bias, True, 0.1, reference.eps)
    return reference(x)


class TiedLanguageModel(torch.nn.Module):
    """An embedding shared with the output projection, as Hugging Face LMs tie them."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(11, 6)
        self.head = torch.nn.Linear(6, 11, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, ids):
        return self.head(torch.tanh(self.embed(ids)))


def test_tied_parameters_stay_tied_on_tpu(no_fallback):
    # torch makes a new Parameter per module when the device is not one of its dense backends;
    # the conversion points every slot of a shared Parameter back at one (module_conversion.py)
    torch.manual_seed(0)
    model = TiedLanguageModel()
    on_chip = copy.deepcopy(model).to("tpu")
    assert on_chip.head.weight is on_chip.embed.weight
    assert len(list(on_chip.parameters())) == len(list(model.parameters())) == 1
    assert on_chip.to(torch.bfloat16).head.weight is on_chip.embed.weight  # tpu -> tpu conversions too
    on_chip = copy.deepcopy(model).to("tpu")
    ids = torch.tensor([[1, 4, 9, 2]])
    for m, x in ((model, ids), (on_chip, ids.to("tpu"))):
        optimizer = torch.optim.SGD(m.parameters(), lr=0.5)
        for _ in range(3):
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(m(x).flatten(0, 1), x.flatten()).backward()
            optimizer.step()
    torch.testing.assert_close(on_chip.embed.weight.cpu(), model.embed.weight, rtol=1e-5, atol=1e-5)
