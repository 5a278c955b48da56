"""Hugging Face Transformers on device "tpu": model.to("tpu"), from_pretrained(device_map="tpu"),
generate() with the KV cache, and torch.compile(backend="tpu"). Models are built from configs
with random weights (nothing is downloaded). Their int64 bookkeeping (positions, masks, token
ids) has no kernels on the chip, so these flows run with the CPU fallback on; the tests count it."""
import json

import pytest
import torch

import vtpu

transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.usefixtures("cpu_fallback")


def tiny_gpt2():
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=128, n_positions=64, bos_token_id=0,
                                     eos_token_id=1)
    return transformers.GPT2LMHeadModel(config).eval()


def test_model_to_tpu_matches_cpu_and_runs_matmuls_on_the_chip():
    model = tiny_gpt2()
    ids = torch.randint(2, 128, (2, 16))
    with torch.no_grad():
        expected = model(ids).logits
        vtpu.reset_stats()
        got = model.to("tpu")(ids.to("tpu")).logits
    assert got.device.type == "tpu"
    torch.testing.assert_close(got.cpu(), expected, atol=1e-5, rtol=1e-5)
    stats = vtpu.stats()
    assert stats["kernels_launched"] > 0 and stats["ops_fused_away"] > 0
    # Everything runs on the chip: embedding lookups, int64 positions and the causal mask.
    assert stats["cpu_fallbacks"] == {}, stats["cpu_fallbacks"]


def test_from_pretrained_with_device_map_tpu(tmp_path):
    model = tiny_gpt2()
    model.save_pretrained(tmp_path)
    loaded = transformers.AutoModelForCausalLM.from_pretrained(tmp_path, device_map="tpu")
    assert {p.device.type for p in loaded.parameters()} == {"tpu"}
    ids = torch.randint(2, 128, (1, 12))
    with torch.no_grad():
        torch.testing.assert_close(loaded(ids.to("tpu")).logits.cpu(), model(ids).logits, atol=1e-5, rtol=1e-5)


def saved_gpt2(path) -> str:
    """Code (one line) making a tiny GPT-2 `model` with seeded random weights and saving it to `path`."""
    return ("import json, torch, transformers, vtpu; torch.manual_seed(0); "
            "model = transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=4, n_embd=64, n_head=4, vocab_size=128, "
            f"n_positions=64, bos_token_id=0, eos_token_id=1)).eval(); model.save_pretrained({str(path)!r})")


def test_a_model_split_over_two_chips_by_an_explicit_device_map_matches_cpu(run_isolated, tmp_path):
    """Blocks on tpu:0 and tpu:1 of one process (VTPU_CHIPS=2), activations moving between the
    chips, no op on the CPU."""
    done = run_isolated(f"""
        {saved_gpt2(tmp_path)}
        first, second = "tpu:0", "tpu:1"
        split = {{"transformer.wte": first, "transformer.wpe": first, "transformer.drop": first,
                  "transformer.h.0": first, "transformer.h.1": first, "transformer.h.2": second,
                  "transformer.h.3": second, "transformer.ln_f": second,
                  "lm_head": first}}  # lm_head shares the embedding's weight: the same chip
        loaded = transformers.AutoModelForCausalLM.from_pretrained({str(tmp_path)!r}, device_map=split)
        ids = torch.randint(2, 128, (2, 16))
        vtpu.reset_stats()
        with torch.no_grad():
            got = loaded(ids.to(first)).logits.cpu()
            expected = model(ids).logits
        s = vtpu.stats()
        print(json.dumps({{"devices": sorted({{str(p.device) for p in loaded.parameters()}}),
                          "error": (got - expected).abs().max().item(), "moved": s["chip_to_chip_bytes"],
                          "fallbacks": s["cpu_fallbacks"]}}))
    """, VTPU_CHIPS=2, VTPU_CPU_FALLBACK=0)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["devices"] == ["tpu:0", "tpu:1"]
    assert result["error"] < 1e-5
    assert result["moved"] >= 2 * 2 * 16 * 64 * 4  # the hidden states there and back
    assert result["fallbacks"] == {}


def test_device_map_balanced_splits_a_model_over_the_chips_given_vtpu_max_memory(run_isolated, tmp_path):
    """device_map="balanced" with max_memory=vtpu.max_memory() (every chip's free HBM) spreads the
    blocks over tpu:0 and tpu:1; without it Accelerate offers only the current chip for device
    type "tpu" (accelerate 1.16, as on real TPUs), and the model stays on tpu:0."""
    done = run_isolated(f"""
        {saved_gpt2(tmp_path)}
        free = vtpu.max_memory()
        one = transformers.AutoModelForCausalLM.from_pretrained({str(tmp_path)!r}, device_map="balanced")
        loaded = transformers.AutoModelForCausalLM.from_pretrained({str(tmp_path)!r}, device_map="balanced",
                                                                   max_memory=free)
        ids = torch.randint(2, 128, (2, 16))
        vtpu.reset_stats()
        with torch.no_grad():
            got = loaded(ids.to("tpu:0")).logits.cpu()
            expected = model(ids).logits
        s = vtpu.stats()
        print(json.dumps({{"free": {{str(k): v for k, v in free.items()}},
                          "capacity": vtpu._C.stats()["memory"][1]["capacity_bytes"],
                          "one": sorted({{str(p.device) for p in one.parameters()}}),
                          "devices": sorted({{str(p.device) for p in loaded.parameters()}}),
                          "error": (got - expected).abs().max().item(), "moved": s["chip_to_chip_bytes"],
                          "fallbacks": s["cpu_fallbacks"]}}))
    """, VTPU_CHIPS=2, VTPU_CPU_FALLBACK=0)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(result["free"]) == {"0", "1"}
    assert result["free"]["1"] == result["capacity"]  # nothing on tpu:1 yet
    assert result["free"]["0"] <= result["capacity"]
    assert result["one"] == ["tpu:0"]
    assert result["devices"] == ["tpu:0", "tpu:1"]
    assert result["error"] < 1e-5
    assert result["moved"] >= 2 * 16 * 64 * 4  # the hidden states, at least one way
    assert result["fallbacks"] == {}


def test_generate_with_kv_cache_matches_cpu():
    model = tiny_gpt2()
    ids = torch.randint(2, 128, (1, 8))
    expected = model.generate(ids, max_new_tokens=8, do_sample=False, use_cache=True)
    got = model.to("tpu").generate(ids.to("tpu"), max_new_tokens=8, do_sample=False, use_cache=True)
    assert got.cpu().tolist() == expected.tolist()


def test_compiled_gpt2_forward_matches_cpu():
    model = tiny_gpt2()
    ids = torch.randint(2, 128, (2, 16))
    with torch.no_grad():
        expected = model(ids).logits
        torch._dynamo.reset()
        vtpu.reset_stats()
        compiled = torch.compile(model.to("tpu"), backend="tpu")
        for _ in range(2):
            torch.testing.assert_close(compiled(ids.to("tpu")).logits.cpu(), expected, atol=1e-5, rtol=1e-5)
    stats = vtpu.stats()
    assert stats["compiled_graphs"] >= 1 and stats["compiled_calls"] >= 1
