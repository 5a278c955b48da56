"""A fixed sample of the model zoo (the full sweep is scripts/zoo_sweep.py, report in docs/zoo.md):
text decoders and encoders, an encoder-decoder, vision and audio models, each compared with the
CPU in strict_eager, defer_and_fuse and compiled mode."""
import pathlib
import sys

import pytest

pytest.importorskip("transformers")
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import harness  # noqa: E402

SAMPLE = ["gpt2", "llama", "bert", "t5", "vit", "whisper", "wav2vec2"]
# These run with no op left for the CPU fallback (harness's "native" run: fallback off).
NATIVE = {"gpt2", "llama"}


@pytest.mark.parametrize("model_type", SAMPLE)
def test_architecture_matches_cpu_in_every_mode(model_type):
    result = harness.run_architecture(model_type)
    assert result["status"] == "ran", result
    for mode in harness.MODES:
        assert result["modes"][mode]["status"] == "pass", (mode, result["modes"][mode])
    # Strict eager runs one kernel per op; deferral fuses some of them away.
    assert result["modes"]["defer_and_fuse"]["kernels"] < result["modes"]["strict_eager"]["kernels"]
    if model_type in NATIVE:
        assert result["native"]["status"] == "pass", result["native"]


def test_compare_catches_a_wrong_answer():
    import torch

    expected = [torch.ones(4)]
    assert harness.compare(expected, [torch.ones(4)]) == 0
    assert harness.compare(expected, [torch.ones(4) * 1.01]) > harness.TOLERANCE
    assert harness.compare(expected, [torch.tensor([1.0, 1.0, 1.0, float("nan")])]) == float("inf")
    with pytest.raises(AssertionError, match="shape"):
        harness.compare(expected, [torch.ones(5)])
