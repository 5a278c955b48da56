"""A fixed sample of the model zoo (the full sweep is scripts/zoo_sweep.py, report in docs/zoo.md):
text decoders and encoders, an encoder-decoder, vision and audio models, each compared with the
CPU in strict_eager, defer_and_fuse and compiled mode, and one native training step each."""
import pathlib
import sys

import pytest

pytest.importorskip("transformers")
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import harness  # noqa: E402

SAMPLE = ["gpt2", "llama", "bert", "t5", "vit", "whisper", "wav2vec2", "modernbert"]
# These run with no op left for the CPU fallback (harness's "native" run: fallback off).
NATIVE = {"gpt2", "llama", "modernbert"}


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
    # one training step with the fallback off (tests/zoo/training_step.py): every sample model trains on the chip
    assert result["training"]["status"] == "pass", result["training"]


def test_compare_catches_a_wrong_answer():
    import torch

    expected = [torch.ones(4)]
    assert harness.compare(expected, [torch.ones(4)]) == 0
    assert harness.compare(expected, [torch.ones(4) * 1.01]) > harness.TOLERANCE
    assert harness.compare(expected, [torch.tensor([1.0, 1.0, 1.0, float("nan")])]) == float("inf")
    with pytest.raises(AssertionError, match="shape"):
        harness.compare(expected, [torch.ones(5)])


def test_afmoe_mismatches_only_through_its_all_zero_routers_ties():
    """The sweep's afmoe mismatch: its router gate is initialised to zeros, so every expert scores
    the same and topk's choice among ties decides the output. torch's CPU topk takes ties in its
    sort's order, the chip first position first (docs/bridge.md); both are valid top-k answers.
    With any router that does not tie, the model matches the CPU entirely on the chip."""
    import torch

    model, config = harness.build_model("afmoe")
    routers = [m.router.gate.weight for m in model.modules() if hasattr(m, "router")]
    assert routers and all(not w.any() for w in routers)
    tied = torch.full((2, config.num_experts), 0.5)
    assert torch.topk(tied, 2).indices[0].tolist() != [0, 1]  # the CPU's tie order is not the first positions
    assert torch.topk(tied.to("tpu"), 2).indices.cpu()[0].tolist() == [0, 1]
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for w in routers:
            w.copy_(torch.randn(w.shape, generator=g) * 0.02)
    inputs = harness.make_inputs(model, config)
    with torch.no_grad():
        expected = harness.float_tensors(model(**inputs))
    for mode in ("strict_eager", "defer_and_fuse"):
        got, stats = harness.run_on_tpu(model, inputs, mode, fallback=False)
        assert harness.compare(expected, got) <= harness.TOLERANCE, mode
