"""DDP against FSDP2 on 4 simulated chips: one training step of a GPT-2-style model (pre-norm
transformer blocks from torch.nn, random weights) per rank, backend tpu_dist, CPU fallback off.
Prints per strategy the simulated step time, the chips' compute (kernel) time, the time the
interconnect model gives the collectives, how much of it the chips stalled for (exposed) and
so how much was hidden behind compute, and the bytes each collective kind moved. Ranks are
processes on this machine joined by a file store (no network but Gloo on 127.0.0.1).
Usage: PYTHONPATH=torch_bridge/python python3 bench/distributed_training.py [--chip v5e] [--ranks 4]
       [--strategies ddp,fsdp2]   (about 3 minutes per strategy here: 4 ranks on 2 cores)
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap

RANK = textwrap.dedent("""
    import datetime, json, os, sys, torch, torch.distributed as dist, vtpu
    rank, world, strategy = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), sys.argv[1]
    dist.init_process_group("tpu_dist", init_method="file://" + os.environ["STORE"], rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=300))
    torch.manual_seed(0)
    d, heads, layers, seq, batch, vocab = 512, 8, 4, 256, 4, 8192

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
            self.attn = torch.nn.MultiheadAttention(d, heads, batch_first=True)
            self.mlp = torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.GELU(), torch.nn.Linear(4 * d, d))

        def forward(self, x):
            h = self.ln1(x)
            mask = torch.nn.Transformer.generate_square_subsequent_mask(x.shape[1], device=x.device)
            x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
            return x + self.mlp(self.ln2(x))

    class GPT(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed, self.pos = torch.nn.Embedding(vocab, d), torch.nn.Embedding(seq, d)
            self.blocks = torch.nn.ModuleList(Block() for _ in range(layers))
            self.head = torch.nn.Linear(d, vocab)

        def forward(self, ids):
            x = self.embed(ids) + self.pos(torch.arange(ids.shape[1], device=ids.device))
            for b in self.blocks:
                x = b(x)
            return self.head(x)

    model = GPT().to("tpu")
    if strategy == "ddp":
        model = torch.nn.parallel.DistributedDataParallel(model)
    else:
        from torch.distributed.fsdp import fully_shard
        for b in model.blocks:
            fully_shard(b)
        fully_shard(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, vocab, (batch, seq + 1))

    def step():
        logits = model(ids[:, :-1].to("tpu"))
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), ids[:, 1:].reshape(-1).to("tpu"))
        opt.zero_grad()
        loss.backward()
        opt.step()
        vtpu.synchronize()

    step()  # the first step builds the programs and the optimizer state
    vtpu.reset_stats()
    t0 = vtpu._C.simulated_clock(0)
    step()
    s = vtpu.stats()
    print(json.dumps({"step": vtpu._C.simulated_clock(0) - t0, "compute": s["simulated_seconds"],
                      "stall": s["interconnect_wait_seconds"], "interconnect": s["interconnect"],
                      "fallbacks": s["cpu_fallbacks"]}))
    dist.destroy_process_group()
""")


def run(strategy: str, ranks: int, chip: str) -> list[dict]:
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "rank.py")
        with open(script, "w") as f:
            f.write(RANK)
        env = dict(os.environ, WORLD_SIZE=str(ranks), STORE=os.path.join(tmp, "store"), VTPU_CHIP=chip,
                   GLOO_SOCKET_IFNAME="lo")
        procs = [subprocess.Popen([sys.executable, script, strategy], env=dict(env, RANK=str(r)),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(ranks)]
        results = []
        for r, p in enumerate(procs):
            out, err = p.communicate()
            if p.returncode != 0:
                raise SystemExit(f"{strategy} rank {r} failed:\n{err[-3000:]}")
            results.append(json.loads(out.strip().splitlines()[-1]))
        return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chip", default="v5e")
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--strategies", default="ddp,fsdp2")
    args = parser.parse_args()
    print(f"GPT-2-style model (d=512, 4 blocks, vocab 8192, 4 x 256 tokens per rank), {args.ranks} x {args.chip}, "
          "second training step; figures of rank 0, and how far the ranks' step times spread\n")
    print("| strategy | step ms | ranks' spread us | compute ms | interconnect ms | exposed ms | hidden "
          "| collectives (MB) | CPU fallbacks |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |")
    for strategy in args.strategies.split(","):
        ranks = run(strategy, args.ranks, args.chip)
        r = ranks[0]
        spread = max(x["step"] for x in ranks) - min(x["step"] for x in ranks)
        comm = sum(e["modelled_seconds"] for e in r["interconnect"].values())
        kinds = ", ".join(f"{k} {e['bytes'] / 1e6:.1f}" for k, e in sorted(r["interconnect"].items()))
        hidden = 1 - r["stall"] / comm if comm else 0.0
        print(f"| {strategy} | {r['step'] * 1e3:.3f} | {spread * 1e6:.1f} | {r['compute'] * 1e3:.3f} | {comm * 1e3:.3f} | "
              f"{r['stall'] * 1e3:.3f} | {100 * hidden:.0f}% | {kinds} | {sum(r['fallbacks'].values())} |")


if __name__ == "__main__":
    main()
