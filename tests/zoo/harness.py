"""The model-zoo harness: builds a Hugging Face architecture from its default config shrunk to a
few small layers (random weights, nothing downloaded), runs one forward pass on the CPU, then on
device "tpu" in each mode, and compares. Used by tests/zoo (a fixed sample) and by
scripts/zoo_sweep.py (every architecture, writing docs/zoo.md).

Each mode runs with the CPU fallback on (so a model with an op the chip lacks is still compared);
a separate `native` run with the fallback off records the first aten op that is not lowered, so
the report shows both whether the model works and how much of it the chip runs. A training step
with the fallback off follows (tests/zoo/training_step.py).
"""
from __future__ import annotations

import copy
import re
import time
import warnings

import torch

MODES = ("strict_eager", "defer_and_fuse", "compiled")

# Config fields shrunk wherever an architecture has them (sub-configs included), and their targets.
_LAYER_FIELDS = ("num_hidden_layers", "n_layer", "n_layers", "num_layers", "encoder_layers", "decoder_layers",
                 "num_encoder_layers", "num_decoder_layers")
_SHRINK = {
    **{f: 2 for f in _LAYER_FIELDS},
    "hidden_size": 64, "d_model": 64, "n_embd": 64, "embed_dim": 64, "dim": 64,
    "intermediate_size": 128, "ffn_dim": 128, "n_inner": 128, "encoder_ffn_dim": 128, "decoder_ffn_dim": 128,
    "d_ff": 128, "hidden_dim": 128, "moe_intermediate_size": 64, "shared_expert_intermediate_size": 64,
    "num_attention_heads": 4, "n_head": 4, "n_heads": 4, "num_heads": 4, "encoder_attention_heads": 4,
    "decoder_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "d_kv": 16,
    "num_experts": 4, "num_local_experts": 4, "n_routed_experts": 4, "num_experts_per_tok": 2,
    "vocab_size": 512, "image_size": 64,
}
# A second, gentler shrink for architectures whose widths are tied together in ways the first one
# breaks (split sizes, per-layer lists): depth, vocabulary and experts only.
_GENTLE = ("vocab_size", "num_experts", "num_local_experts", "n_routed_experts", "num_experts_per_tok", *_LAYER_FIELDS)
SHRINK_LEVELS = ("small", "gentle")
_TOKEN_FIELDS = ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id", "sep_token_id",
                 "cls_token_id", "mask_token_id")
MAX_PARAMETERS = 50_000_000


class NotBuildable(Exception):
    """The harness cannot make a small model or its inputs for this architecture."""


def _shrink(config, level: str = "small", seen=None) -> None:
    seen = seen if seen is not None else set()
    if id(config) in seen:
        return
    seen.add(id(config))
    for field, target in _SHRINK.items():
        if level == "gentle" and field not in _GENTLE:
            continue
        value = getattr(config, field, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > target:
            try:
                setattr(config, field, target)
            except Exception:  # some configs derive fields (read-only properties)
                pass
    layers = next((getattr(config, f) for f in _LAYER_FIELDS if isinstance(getattr(config, f, None), int)), None)
    if layers is not None and isinstance(getattr(config, "layer_types", None), list):
        # Keep one layer of each kind first (hybrids need their attention layer), then in order.
        kinds = list(dict.fromkeys(config.layer_types))
        try:
            config.layer_types = (kinds + config.layer_types[len(kinds):])[:max(layers, len(kinds))]
            for f in _LAYER_FIELDS:
                if getattr(config, f, None) == layers:
                    setattr(config, f, len(config.layer_types))
        except AttributeError:  # derived from other fields (a read-only property)
            pass
    vocab = getattr(config, "vocab_size", None)
    for field in _TOKEN_FIELDS:
        value = getattr(config, field, None)
        if isinstance(vocab, int) and isinstance(value, int) and value >= vocab:
            setattr(config, field, min(vocab - 1, 2))
    for value in list(vars(config).values()):
        if hasattr(value, "to_dict") and hasattr(value, "model_type"):
            _shrink(value, level, seen)


def build_model(model_type: str, level: str = "small"):
    """A randomly initialised, shrunk base model of this architecture (CPU, eval mode)."""
    import transformers
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    if model_type not in MODEL_MAPPING_NAMES:
        raise NotBuildable("no base model class (AutoModel)")
    try:
        config = transformers.AutoConfig.for_model(model_type)
        _shrink(config, level)
        torch.manual_seed(0)
        model = transformers.AutoModel.from_config(config).eval()
    except Exception as e:  # noqa: BLE001  (any failure to build counts as not buildable)
        raise NotBuildable(f"building: {type(e).__name__}: {first_line(e)}") from e
    parameters = sum(p.numel() for p in model.parameters())
    if parameters > MAX_PARAMETERS:
        raise NotBuildable(f"{parameters / 1e6:.0f}M parameters after shrinking")
    return model, config


def _find(config, *fields):
    for field in fields:
        for c in (config, getattr(config, "vision_config", None), getattr(config, "audio_config", None),
                  getattr(config, "encoder_config", None)):
            value = getattr(c, field, None) if c is not None else None
            if value is not None:
                return value
    return None


def make_inputs(model, config) -> dict:
    """Inputs for the model's main input (token ids, pixels or audio) from the config's sizes."""
    g = torch.Generator().manual_seed(0)
    inputs = _main_input(model.main_input_name, config, g)
    if getattr(config, "is_encoder_decoder", False):
        vocab = _find(config, "vocab_size") or 100
        inputs["decoder_input_ids"] = torch.randint(3, max(4, min(vocab, 100)), (1, 6), generator=g)
    return inputs


def _main_input(name: str, config, g: torch.Generator) -> dict:
    if name == "input_ids":
        vocab = _find(config, "vocab_size") or 100
        return {"input_ids": torch.randint(3, max(4, min(vocab, 100)), (1, 8), generator=g)}
    if name == "pixel_values":
        size = _find(config, "image_size") or 64
        size = tuple(size) if isinstance(size, (list, tuple)) else (size, size)
        channels = _find(config, "num_channels") or 3
        return {"pixel_values": torch.randn(1, channels, *size, generator=g)}
    if name == "input_values":
        return {"input_values": torch.randn(1, 4000, generator=g)}
    if name == "input_features":
        bins = _find(config, "num_mel_bins", "feature_size") or 80
        frames = 2 * (_find(config, "max_source_positions") or 50)
        return {"input_features": torch.randn(1, bins, frames, generator=g)}
    raise NotBuildable(f"no inputs for main input '{name}'")


def float_tensors(output) -> list:
    if isinstance(output, torch.Tensor):
        return [output] if output.is_floating_point() else []
    if hasattr(output, "to_tuple"):
        output = output.to_tuple()
    if isinstance(output, dict):
        output = list(output.values())
    if isinstance(output, (list, tuple)):
        return [t for item in output for t in float_tensors(item)]
    return []


def first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [""])[0][:200]


def failing_aten_op(e: BaseException) -> str | None:
    """The aten op an error names (vtpu's errors name the op that is not lowered)."""
    m = re.search(r"aten::[\w.]+", str(e))
    return m.group(0) if m else None


def compare(expected: list, got: list) -> float:
    """Largest error relative to each output's magnitude; raises on a structural difference."""
    if len(expected) != len(got):
        raise AssertionError(f"{len(got)} float outputs, expected {len(expected)}")
    worst = 0.0
    for e, g in zip(expected, got):
        g = g.detach().cpu()
        if e.shape != g.shape:
            raise AssertionError(f"shape {tuple(g.shape)}, expected {tuple(e.shape)}")
        finite = torch.isfinite(e)
        if not torch.equal(finite, torch.isfinite(g)):
            return float("inf")
        if finite.any():
            scale = max(1.0, e[finite].abs().max().item())
            worst = max(worst, (e[finite] - g[finite]).abs().max().item() / scale)
    return worst


TOLERANCE = 1e-3  # relative to each output's largest magnitude; f32 matmuls run in 6 bf16 passes


def run_on_tpu(model, inputs: dict, mode: str, fallback: bool) -> tuple[list, dict]:
    import vtpu

    vtpu.set_cpu_fallback(fallback)
    vtpu.set_mode("defer_and_fuse" if mode == "compiled" else mode)
    vtpu.synchronize()
    vtpu.reset_stats()
    on_chip = copy.deepcopy(model).to("tpu")
    tpu_inputs = {k: v.to("tpu") for k, v in inputs.items()}
    runner = on_chip
    if mode == "compiled":
        torch._dynamo.reset()
        runner = torch.compile(on_chip, backend="tpu")
    torch.manual_seed(0)  # models that draw random numbers in forward (masking) draw the CPU's
    with torch.no_grad():
        outputs = [t.cpu() for t in float_tensors(runner(**tpu_inputs))]
    vtpu.synchronize()
    return outputs, vtpu.stats()


def run_architecture(model_type: str, modes=MODES, native: bool = True, training: bool = True) -> dict:
    """One architecture through every mode: {'model_type', 'status', 'modes': {...}, 'native': {...},
    'training': {...}} (training: one native training step, tests/zoo/training_step.py).
    status: 'not_buildable' | 'cpu_error' | 'ran' (see each mode's own status)."""
    started = time.perf_counter()
    result = {"model_type": model_type}
    warnings.simplefilter("ignore")
    failure = None
    for level in SHRINK_LEVELS:  # the gentler shrink only when the small model does not run on the CPU
        try:
            model, config = build_model(model_type, level)
            inputs = make_inputs(model, config)
        except NotBuildable as e:
            failure = failure or {**result, "status": "not_buildable", "reason": str(e)}
            continue
        # The training step starts from a model no forward pass has touched: some cache tensors in
        # eval mode (LeViT's attention biases), and one cached under no_grad has no gradient.
        untouched = copy.deepcopy(model) if training else None
        try:
            torch.manual_seed(0)
            with torch.no_grad():
                expected = [t.clone() for t in float_tensors(model(**inputs))]
            break
        except Exception as e:  # noqa: BLE001
            failure = {**result, "status": "cpu_error", "reason": f"{type(e).__name__}: {first_line(e)}"}
    else:
        return failure
    result["shrink"] = level
    if not expected:
        return {**result, "status": "not_buildable", "reason": "no floating-point output to compare"}
    result.update(status="ran", parameters=sum(p.numel() for p in model.parameters()), modes={})
    for mode in modes:
        try:
            got, stats = run_on_tpu(model, inputs, mode, fallback=True)
            error = compare(expected, got)
            result["modes"][mode] = {
                "status": "pass" if error <= TOLERANCE else "mismatch",
                "relative_error": error,
                "fallback_ops": sorted(stats["cpu_fallbacks"]),
                "kernels": stats["kernels_launched"],
                "simulated_seconds": stats["simulated_seconds"],
            }
        except Exception as e:  # noqa: BLE001  (reported per mode, never hidden)
            result["modes"][mode] = {"status": "error", "error": f"{type(e).__name__}: {first_line(e)}",
                                     "failing_op": failing_aten_op(e)}
    try:
        if native:
            run_on_tpu(model, inputs, "defer_and_fuse", fallback=False)
            result["native"] = {"status": "pass"}
    except Exception as e:  # noqa: BLE001
        result["native"] = {"status": "error", "failing_op": failing_aten_op(e), "error": first_line(e)}
    if training:
        import training_step

        result["training"] = training_step.run_training(untouched, inputs)
    result["seconds"] = round(time.perf_counter() - started, 2)
    return result


def _worker(model_types: list[str]) -> None:
    """scripts/zoo_sweep.py runs this in subprocesses: 'START <type>' then one JSON line per type
    (with a first argument --training-only: the training step alone, no forward modes)."""
    import json
    import sys

    training_only = model_types[:1] == ["--training-only"]
    for model_type in model_types[training_only:]:
        print(f"START {model_type}", flush=True)
        try:
            result = run_architecture(model_type, modes=() if training_only else MODES, native=not training_only)
        except BaseException as e:  # noqa: BLE001  (the harness itself failed: report, go on)
            result = {"model_type": model_type, "status": "harness_error", "reason": f"{type(e).__name__}: {first_line(e)}"}
        print("RESULT " + json.dumps(result), flush=True)
        sys.stdout.flush()


if __name__ == "__main__":
    import sys

    _worker(sys.argv[1:])
