"""TorchTitan (PyPI torchtitan 0.2.2) trains its Llama 3 debug model on 2 tpu ranks with backend
tpu_dist and FSDP2, through examples/torchtitan_debug_model.py: 3 steps, every rank logs the same
loss at each step, and the loss falls (the example's dataset is one repeated 8-word cycle)."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "torchtitan_debug_model.py"


@pytest.mark.parametrize("flavor", ["debugmodel", "debugmodel_flex_attn"])
def test_debug_model_trains_on_two_ranks(flavor):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))  # the build's vtpu, as conftest set it up
    out = subprocess.run([sys.executable, str(EXAMPLE), "--ranks", "2", "--steps", "3", "--flavor", flavor],
                         capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    losses = result["losses"]
    assert sorted(losses) == ["0", "1"], result
    assert losses["0"] == losses["1"], result
    assert len(losses["0"]) == 3 and losses["0"][0] > losses["0"][1] > losses["0"][2], result
