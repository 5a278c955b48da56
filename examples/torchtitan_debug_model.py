"""TorchTitan's smallest Llama 3 debug model, trained for a few steps on 2 `tpu` ranks.

    python3 examples/torchtitan_debug_model.py [--ranks 2] [--steps 3] [--device tpu|cpu]

It runs TorchTitan's own trainer (`torchtitan.train`, PyPI `torchtitan`) under torchrun with
backend tpu_dist, one virtual chip per rank, FSDP over the ranks, and prints each step's loss as
TorchTitan logs it. Nothing is downloaded: the trainer's tokenizer and text dataset (which its
repository keeps under tests/assets, not in the wheel) are made here, in a temporary folder.

What it needs, beyond `pip install torchtitan` (docs/distributed.md says why):
- `triton` importable: torchtitan imports it at module level, even on a CPU-only host.
- `TORCHDYNAMO_DISABLE=1`: TorchTitan compiles flex_attention and create_block_mask with
  Inductor, which has no code generator for device `tpu`; with Dynamo off, torch runs
  flex_attention's own eager implementation, op by op, on the chip.
- a shorter sequence and batch than the debug config's 2048 x 8, so that a step takes seconds
  of host time on the simulator (the model is the debug model itself: 6 layers, dim 256).
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

# Plain words for a word-level vocabulary: the debug model's vocabulary is 2048 entries.
WORDS = [f"w{i}" for i in range(1000)]
SPECIALS = ["<|unk|>", "<|begin_of_text|>", "<|end_of_text|>"]


def write_tokenizer(folder):
    """A word-level tokenizer.json and its tokenizer_config.json, as HuggingFaceTokenizer loads."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {w: i for i, w in enumerate(SPECIALS + WORDS)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<|unk|>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.add_special_tokens(SPECIALS)
    tok.save(os.path.join(folder, "tokenizer.json"))
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>", "add_bos_token": True,
                   "add_eos_token": True}, f)


def write_dataset(folder, documents=200, seed=0):
    """A text dataset of random word sequences, one JSON object per line with a "text" field
    (what the trainer's c4_test loader reads), that `datasets.load_dataset(folder)` loads."""
    import random

    rng = random.Random(seed)
    with open(os.path.join(folder, "train.jsonl"), "w") as f:
        for _ in range(documents):
            # A repeating motif, so the loss has something to learn within a few steps.
            motif = rng.sample(WORDS[:50], 8)
            text = " ".join(motif[i % 8] for i in range(rng.randint(100, 300)))
            f.write(json.dumps({"text": text}) + "\n")


def trainer_args(work, steps, seq_len, batch):
    return ["--module", "llama3", "--config", "llama3_debugmodel",
            "--hf_assets_path", os.path.join(work, "tokenizer"),
            "--dataloader.dataset_path", os.path.join(work, "data"),
            "--training.steps", str(steps), "--training.seq_len", str(seq_len),
            "--training.local_batch_size", str(batch),
            "--lr_scheduler.warmup_steps", "1", "--parallelism.spmd_backend", "partial_dtensor",
            "--dump_folder", os.path.join(work, "outputs"),
            "--checkpoint.no-enable", "--metrics.no-enable_tensorboard"]


def run(ranks, steps, device, seq_len, batch, port):
    with tempfile.TemporaryDirectory() as work:
        for sub in ("tokenizer", "data"):
            os.makedirs(os.path.join(work, sub))
        write_tokenizer(os.path.join(work, "tokenizer"))
        write_dataset(os.path.join(work, "data"))
        env = dict(os.environ, TORCHDYNAMO_DISABLE="1", HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1",
                   WANDB_MODE="disabled")
        if device == "cpu":
            env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"  # torchtitan then picks the CPU and Gloo
        cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={ranks}",
               "--master_addr=127.0.0.1", f"--master_port={port}", "--local-ranks-filter=0,1,2,3",
               "--role=rank", "--tee=3", "-m", "torchtitan.train"] + trainer_args(work, steps, seq_len, batch)
        out = subprocess.run(cmd, env=env, capture_output=True, text=True)
        return out.returncode, out.stdout + out.stderr


def losses(log):
    """{rank: [loss per step]} from TorchTitan's step lines ("step:  2  loss:  7.61 ...")."""
    found = {}
    for m in re.finditer(r"\[rank(\d+)\].*?step:\s*(\d+)\s+loss:\s*([0-9.]+)", log):
        found.setdefault(int(m.group(1)), {})[int(m.group(2))] = float(m.group(3))
    return {r: [steps[s] for s in sorted(steps)] for r, steps in sorted(found.items())}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--device", choices=["tpu", "cpu"], default="tpu")
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--port", type=int, default=29517)
    p.add_argument("--log", action="store_true", help="print the whole trainer log")
    a = p.parse_args()
    rc, log = run(a.ranks, a.steps, a.device, a.seq_len, a.batch, a.port)
    if a.log or rc != 0:
        print(log)
    print(json.dumps({"returncode": rc, "device": a.device, "losses": losses(log)}))
    sys.exit(rc)


if __name__ == "__main__":
    main()
