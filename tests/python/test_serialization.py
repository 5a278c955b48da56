"""Saving and loading tpu tensors and modules as users do with CUDA ones: torch.save/torch.load
with and without map_location (torch.load restores onto tpu inside torch.tpu.device), deepcopy
and pickling of modules, and safetensors files."""
import copy
import io
import pickle

import pytest
import torch

import vtpu  # noqa: F401


def state():
    torch.manual_seed(0)
    return {"w": torch.randn(3, 4).to("tpu"), "ids": torch.arange(5).to("tpu"), "half": torch.randn(2).to(torch.bfloat16).to("tpu")}


def saved(obj) -> io.BytesIO:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    buffer.seek(0)
    return buffer


@pytest.mark.parametrize("map_location", [None, "tpu", "tpu:0", "cpu"])
def test_save_load_round_trip(map_location):
    original = state()
    loaded = torch.load(saved(original), map_location=map_location)
    for key, value in original.items():
        assert loaded[key].device.type == (map_location or "tpu").split(":")[0]
        assert loaded[key].dtype == value.dtype and torch.equal(loaded[key].cpu(), value.cpu())


def test_device_context_manager_sets_and_restores_the_current_device():
    before = torch.tpu.current_device()
    with torch.tpu.device("tpu:0") as ctx:
        assert torch.tpu.current_device() == 0 and ctx.index == 0
    assert torch.tpu.current_device() == before


def test_module_state_dict_deepcopy_and_pickle():
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.LayerNorm(8)).to("tpu")
    x = torch.randn(2, 4).to("tpu")
    want = model(x).detach().cpu()
    for clone in (copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
        assert next(clone.parameters()).device.type == "tpu"
        torch.testing.assert_close(clone(x).detach().cpu(), want)
    fresh = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.LayerNorm(8)).to("tpu")
    fresh.load_state_dict(torch.load(saved(model.state_dict())))
    torch.testing.assert_close(fresh(x).detach().cpu(), want)


def test_safetensors_round_trip(tmp_path):
    safetensors = pytest.importorskip("safetensors.torch")
    original = state()
    path = tmp_path / "weights.safetensors"
    safetensors.save_file(original, str(path))
    # safetensors' loader knows only its own device names: load to the host, then move
    loaded = {k: v.to("tpu") for k, v in safetensors.load_file(str(path)).items()}
    for key, value in original.items():
        assert torch.equal(loaded[key].cpu(), value.cpu())
