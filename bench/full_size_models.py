"""Full-size decoders timed on one simulated chip, timing only (vtpu.timing_only): the model is
built on the meta device and moved with to_empty(device="tpu"), so its weights take no host
memory. Each row runs in its own process (its own preset, its own peak RSS) and prints host
seconds, peak RSS, simulated seconds, tokens/s and MFU (2 x parameters x tokens, attention not
counted, over the chip's bf16 peak).

Three workloads: a prefill (a forward over the prompt with a KV cache, the logits of every
token), a decode step (one new token per sequence against the cache a prefill of the context
left, as Hugging Face's generate runs it: a DynamicCache, the prefill's logits for the last token
only; only the decode step is timed) and a training step (forward with labels, backward, AdamW).
Most rows run in defer_and_fuse; Llama-3-8B's also in strict_eager and compiled (torch.compile
with backend "tpu").

The 30B-class row answers TorchTPU's reported throughput of a 30B dense model on one v7 (25,700
tokens/s at 5,120 tokens, 22,400 at 10,240; its architecture is not public): vtpu's model is
LLaMA's 33B shape (hidden 6656, 60 layers, 52 heads of 128, MLP 17920, vocabulary 32000) in bf16,
prefill with a KV cache, defer_and_fuse. An estimate, not a calibration point.

    python3 bench/full_size_models.py [--quick] [--write] [--report DIR]
      --quick: the 5,120-token 30B-class row only
      --report DIR: also a vtpu.report of the Llama-3-8B prefill on v6e (report.md, roofline.png)
"""
from __future__ import annotations

import argparse
import contextlib
import json
import pathlib
import time

from chip_processes import json_lines, preset, run_worker

ROOT = pathlib.Path(__file__).resolve().parents[1]

MODELS = {
    # LLaMA 33B's shape (the "30B" of the LLaMA paper), ~32.5B parameters.
    "30B-class dense (LLaMA-33B shape)": dict(hidden_size=6656, intermediate_size=17920, num_hidden_layers=60,
                                              num_attention_heads=52, num_key_value_heads=52, vocab_size=32000),
    # Llama-2-7B's published config (multi-head attention).
    "Llama-2-7B": dict(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
                       num_key_value_heads=32, vocab_size=32000),
    # Llama-3-8B's published config (grouped-query attention, 8 KV heads).
    "Llama-3-8B": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                       num_key_value_heads=8, vocab_size=128256, rope_theta=500000.0),
    # Gemma-2B's published config (google/gemma-2b): multi-query attention with 256-wide heads, a
    # 256,000-entry vocabulary tied to the embedding, GeGLU MLP; transformers' GemmaConfig.
    "Gemma-2B": dict(hidden_size=2048, intermediate_size=16384, num_hidden_layers=18, num_attention_heads=8,
                     num_key_value_heads=1, head_dim=256, vocab_size=256000),
}
# Each model's transformers classes (config, causal LM): LLaMA's unless named here.
FAMILIES = {"Gemma-2B": ("GemmaConfig", "GemmaForCausalLM")}
# (model, chip, workload, tokens, TorchTPU's reported tokens/s or None, mode). A prefill's tokens
# are its prompt; a decode row's are (sequences, context): one new token for each. The mode is
# vtpu's (strict_eager, defer_and_fuse) or compiled (torch.compile with backend "tpu").
ROWS = [
    ("30B-class dense (LLaMA-33B shape)", "v7", "prefill", 5120, 25700, "defer_and_fuse"),
    ("30B-class dense (LLaMA-33B shape)", "v7", "prefill", 10240, 22400, "defer_and_fuse"),
    ("Llama-2-7B", "v7", "prefill", 4096, None, "defer_and_fuse"),
    ("Llama-2-7B", "v6e", "prefill", 4096, None, "defer_and_fuse"),
    ("Llama-3-8B", "v6e", "prefill", 4096, None, "defer_and_fuse"),
    ("Llama-3-8B", "v6e", "prefill", 4096, None, "strict_eager"),
    ("Llama-3-8B", "v6e", "prefill", 4096, None, "compiled"),
    ("Llama-3-8B", "v6e", "decode", (8, 2048), None, "defer_and_fuse"),
    ("Llama-3-8B", "v6e", "decode", (8, 2048), None, "strict_eager"),
    ("Llama-3-8B", "v6e", "decode", (8, 2048), None, "compiled"),
    ("30B-class dense (LLaMA-33B shape)", "v7", "decode", (8, 2048), None, "defer_and_fuse"),
    ("Gemma-2B", "v6e", "prefill", 4096, None, "defer_and_fuse"),
    ("Gemma-2B", "v6e", "decode", (8, 2048), None, "defer_and_fuse"),
    ("Llama-3-8B", "v7", "train", 8192, None, "defer_and_fuse"),
    ("Llama-3-8B", "v7", "train", 8192, None, "strict_eager"),
    ("Llama-3-8B", "v7", "train", 8192, None, "compiled"),
]


def worker(model: str, workload: str, sequences: int, tokens: int, mode: str, report_dir: str | None) -> None:
    import resource

    import torch
    import transformers

    import vtpu

    config_class, model_class = (getattr(transformers, name) for name in FAMILIES.get(model, ("LlamaConfig", "LlamaForCausalLM")))
    config = config_class(**MODELS[model], max_position_embeddings=tokens + 1)
    config._attn_implementation = "sdpa"
    start = time.time()
    with torch.device("meta"):
        net = model_class(config).to(torch.bfloat16).eval()
    parameters = sum(p.numel() for p in net.parameters())
    timed_tokens = sequences * (tokens if workload in ("prefill", "train") else 1)
    vtpu.set_mode("defer_and_fuse" if mode == "compiled" else mode)
    if workload == "train":
        # Without a KV cache Hugging Face reads the position ids to detect packed sequences, and
        # timing-only values are placeholders (zeros, one sequence per token to that check); the
        # bench's batch is one unpacked sequence per row, which is what it would find.
        import transformers.masking_utils

        transformers.masking_utils.find_packed_sequence_indices = lambda *args, **kwargs: None
    with vtpu.timing_only(), torch.set_grad_enabled(workload == "train"):
        net.to_empty(device="tpu")
        run = torch.compile(net, backend="tpu", dynamic=False) if mode == "compiled" else net
        ids = torch.zeros(sequences, tokens, dtype=torch.long, device="tpu")
        cache = None
        if workload == "decode":
            cache = run(ids, use_cache=True, logits_to_keep=1).past_key_values
            ids = ids[:, -1:]
        optimizer = torch.optim.AdamW(net.parameters(), lr=1e-5) if workload == "train" else None
        vtpu.synchronize()
        vtpu.reset_stats()
        with (vtpu.report.profile(report_dir, model_flops=flops_per_token(workload) * parameters * timed_tokens, trace=False)
              if report_dir else contextlib.nullcontext()):
            if workload == "train":  # one step: forward with labels, backward, AdamW
                net.train()
                run(ids, labels=ids, use_cache=False).loss.backward()
                optimizer.step()
                optimizer.zero_grad()
            else:  # with a KV cache the causal mask is SDPA's is_causal: no packed-sequence check
                logits = run(ids, past_key_values=cache, use_cache=True).logits  # noqa: F841
            vtpu.synchronize()
        stats = vtpu.stats()
    print(json.dumps({"host_s": time.time() - start, "rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
                      "seconds": stats["simulated_seconds"], "parameters": parameters, "timed_tokens": timed_tokens,
                      "kernels": stats["kernels_launched"], "memo": stats["timing_memo_hits"],
                      "hbm_bytes": stats["hbm_read_bytes"] + stats["hbm_write_bytes"],
                      "placeholder_kernels": sorted(stats["timing_only_data_dependent"]),
                      "top": top_kernels(stats),
                      "fallbacks": stats["cpu_fallback_ops"]}))


def flops_per_token(workload: str) -> int:
    """Model FLOPs per parameter and token: 2 for a forward, 6 for a training step (the forward
    and a backward of twice its work); attention's own FLOPs are not counted."""
    return 6 if workload == "train" else 2


def top_kernels(stats: dict, count: int = 5) -> list[tuple[str, float]]:
    """The kernels (fused labels) that took the most simulated cycles, with their share."""
    total = sum(v["cycles"] for v in stats["per_kernel"].values()) or 1
    ranked = sorted(stats["per_kernel"].items(), key=lambda kv: -kv[1]["cycles"])[:count]
    return [(label, v["cycles"] / total) for label, v in ranked]


def run_row(model: str, chip: str, workload: str, tokens, report_dir: str | None = None, mode: str = "defer_and_fuse",
            env: dict | None = None) -> dict:
    """The worker's figures, or {"error": its last line} when the run failed. `chip`: a preset's
    name or a preset file; `mode`: strict_eager, defer_and_fuse or compiled (torch.compile with
    backend "tpu"); `env`: more variables for the worker (VTPU_FUSION)."""
    sequences, length = tokens if isinstance(tokens, tuple) else (1, tokens)
    out = run_worker(__file__, chip, model, workload, str(sequences), str(length), mode, report_dir or "", env=env)
    if out.returncode != 0:
        return {"error": out.stderr.strip().splitlines()[-1]}
    return json_lines(out)[-1]


def describe(workload: str, tokens) -> str:
    if workload == "decode":
        return f"decode step, {tokens[0]} x 1 (context {tokens[1]:,})"
    if workload == "train":
        return f"training step, {tokens:,} (forward, backward, AdamW)"
    return f"prefill, {tokens:,}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--worker", nargs=6, help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="the 5,120-token 30B-class row only")
    parser.add_argument("--write", action="store_true", help="write docs/full_size_models.md")
    parser.add_argument("--report", metavar="DIR", help="a vtpu.report of the Llama-3-8B prefill on v6e in DIR")
    args = parser.parse_args()
    if args.worker:
        model, workload, sequences, tokens, mode, report_dir = args.worker
        worker(model, workload, int(sequences), int(tokens), mode, report_dir or None)
        return
    lines = ["| model | chip | workload, tokens | mode | parameters | host s | peak RSS GiB | simulated ms | tokens/s | MFU | "
             "TorchTPU tokens/s | kernels (memoised) |",
             "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    print("\n".join(lines), flush=True)
    notes = set()
    shares = []
    for model, chip, workload, tokens, reported, mode in ROWS[:1] if args.quick else ROWS:
        r = run_row(model, chip, workload, tokens, mode=mode)
        if "error" in r:
            line = f"| {model} | {chip} | {describe(workload, tokens)} | {mode} | fails: {r['error'].replace('|', '/')} |"
            print(line, flush=True)
            lines.append(line)
            continue
        timed = r["timed_tokens"]
        mfu = flops_per_token(workload) * r["parameters"] * timed / r["seconds"] / preset(chip)["peak_bf16_flops"]["value"]
        line = (f"| {model} | {chip} | {describe(workload, tokens)} | {mode} | {r['parameters'] / 1e9:.1f}B | {r['host_s']:.0f} | "
                f"{r['rss_gib']:.2f} | {r['seconds'] * 1e3:.1f} | {timed / r['seconds']:,.0f} | {100 * mfu:.0f}% | "
                f"{f'{reported:,}' if reported else '-'} | {r['kernels']} ({r['memo']}) |")
        print(line, flush=True)
        lines.append(line)
        if mode != "defer_and_fuse":
            continue  # the other modes' shares repeat defer_and_fuse's (strict_eager: unfused labels)
        shares.append(f"- {model}, {chip}, {describe(workload, tokens)}: " +
                      ", ".join(f"`{label}` {100 * share:.0f}%" for label, share in r["top"]))
        notes.update(r["placeholder_kernels"])
        if r["fallbacks"]:
            notes.add(f"{r['fallbacks']} CPU fallbacks")
    tail = (f"\nKernels timed from placeholder values (their control flow may read data): "
            f"{', '.join(sorted(notes)) or 'none'}.\n\nWhere the simulated time goes (the kernels with the most "
            f"cycles, by fused label; `mm` is every matmul not fused with its neighbours):\n" + "\n".join(shares))
    print(tail)
    if args.write:
        page = (ROOT / "bench" / "full_size_models_page.md").read_text()
        (ROOT / "docs" / "full_size_models.md").write_text(page.replace("{{TABLE}}", "\n".join(lines) + "\n" + tail))
    if args.report:
        r = run_row("Llama-3-8B", "v6e", "prefill", 4096, str(pathlib.Path(args.report).resolve()))
        print(f"report of the Llama-3-8B prefill on v6e in {args.report}" if "error" not in r else f"report failed: {r['error']}")


if __name__ == "__main__":
    main()
