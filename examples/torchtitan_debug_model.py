"""TorchTitan's smallest Llama 3 debug model, trained for a few steps on 2 `tpu` ranks.

    python3 examples/torchtitan_debug_model.py [--ranks 2] [--steps 3] [--flavor debugmodel_flex_attn]

It runs TorchTitan's own trainer (`python -m torchtitan.train`, PyPI torchtitan 0.2.2, which
scripts/bootstrap installs) under torchrun: one process per rank, each on chip tpu:LOCAL_RANK of
its own simulator, backend tpu_dist (TorchTitan takes the device's default backend), the model
fully sharded over the ranks (FSDP2), the CPU fallback off. It prints each step's loss as every
rank logged it. Nothing is downloaded: the tokenizer and text dataset, which TorchTitan's
repository keeps under tests/assets rather than in the wheel, are made here in a temporary folder.

What it needs, beyond `pip install torchtitan==0.2.2` (docs/distributed.md says why):
- `triton` importable: torchtitan imports it at module level, even on a host without a GPU.
- `VTPU_CHIPS` = the number of ranks: TorchTitan 0.2.2 puts rank r on device `tpu:r`, as it would
  on `cuda:r`, so every process simulates that many chips and uses its own.
- `TORCHDYNAMO_DISABLE=1` for the flex-attention flavor: TorchTitan compiles flex_attention and
  create_block_mask with Inductor, which has no code generator for `tpu`; with Dynamo off, torch
  runs flex_attention's eager implementation on the chip (vtpu admits tpu inputs to it).
- a shorter sequence and batch than the debug config's 2048 x 8, so a step takes about a second
  of host time (the model is the debug model itself: 6 layers, dim 256, vocabulary 2048).
"""

import argparse
import json
import os
import re
import socket
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
    """A text dataset that `datasets.load_dataset(folder)` loads as the trainer's c4_test loader
    expects (one JSON object per line with a "text" field): every document cycles through the
    same 8 words from a random start, so a model that learns drives its loss from ln(2048) toward
    0 within a few steps, and a falling loss shows the steps update the weights."""
    import random

    rng = random.Random(seed)
    motif = rng.sample(WORDS, 8)
    with open(os.path.join(folder, "train.jsonl"), "w") as f:
        for _ in range(documents):
            start = rng.randrange(8)
            text = " ".join(motif[(start + i) % 8] for i in range(rng.randint(100, 300)))
            f.write(json.dumps({"text": text}) + "\n")


def trainer_args(work, steps, seq_len, batch, flavor):
    """torchtitan 0.2.2's command line (its JobConfig), with the assets made here."""
    return ["--model.name", "llama3", "--model.flavor", flavor,
            "--model.hf_assets_path", os.path.join(work, "tokenizer"),
            "--training.dataset", "c4_test", "--training.dataset_path", os.path.join(work, "data"),
            "--training.steps", str(steps), "--training.seq_len", str(seq_len),
            "--training.local_batch_size", str(batch), "--lr_scheduler.warmup_steps", "1",
            "--metrics.log_freq", "1", "--metrics.disable_color_printing", "--debug.seed", "0",
            "--job.dump_folder", os.path.join(work, "outputs")]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(ranks, steps, seq_len, batch, flavor, port):
    """TorchTitan's trainer under torchrun, one tpu chip per rank; (return code, every rank's log)."""
    with tempfile.TemporaryDirectory() as work:
        for sub in ("tokenizer", "data"):
            os.makedirs(os.path.join(work, sub))
        write_tokenizer(os.path.join(work, "tokenizer"))
        write_dataset(os.path.join(work, "data"))
        env = dict(os.environ, TORCHDYNAMO_DISABLE="1", HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1",
                   WANDB_MODE="disabled", VTPU_CHIPS=str(ranks))
        cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={ranks}",
               "--master_addr=127.0.0.1", f"--master_port={port}", "--tee=3",
               "-m", "torchtitan.train"] + trainer_args(work, steps, seq_len, batch, flavor)
        out = subprocess.run(cmd, env=env, capture_output=True, text=True)
        return out.returncode, out.stdout + out.stderr


def losses(log):
    """{rank: [loss of each step]} from TorchTitan's step lines ("step:  2  loss:  7.61 ...")."""
    found = {}
    for m in re.finditer(r"\[(?:rank|default)(\d+)\].*?step:\s*(\d+)\s+loss:\s*([0-9.]+)", log):
        found.setdefault(int(m.group(1)), {})[int(m.group(2))] = float(m.group(3))
    return {r: [steps[s] for s in sorted(steps)] for r, steps in sorted(found.items())}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--flavor", default="debugmodel", help="debugmodel (SDPA) or debugmodel_flex_attn")
    p.add_argument("--port", type=int, default=0, help="torchrun's rendezvous port on 127.0.0.1 (0: a free one)")
    p.add_argument("--log", action="store_true", help="print every rank's whole log")
    a = p.parse_args()
    rc, log = run(a.ranks, a.steps, a.seq_len, a.batch, a.flavor, a.port or free_port())
    if a.log or rc != 0:
        print(log)
    print(json.dumps({"returncode": rc, "flavor": a.flavor, "losses": losses(log)}))
    sys.exit(rc)


if __name__ == "__main__":
    main()
