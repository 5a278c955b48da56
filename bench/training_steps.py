"""Two training steps of ordinary models on "tpu", as a user writes them, with the CPU fallback
off unless --fallback is given: a resnet18-style CNN (conv, batch norm in training mode, max pool,
residual adds, adaptive average pool, cross entropy, SGD with momentum) and a GPT-2-style causal
language model block (embeddings, layer norm, causal attention, GELU MLP, cross entropy over
shifted labels, AdamW, clip_grad_norm_). Random weights, built from configs.

Prints per model: whether it ran, the first op that could not run on the chip (without the
fallback), the ops that fell back and how often (with it), the ops that ran as torch's
decomposition, simulated chip time, host time against the same steps on the CPU, and the largest
difference of the losses from the CPU's.
Usage: PYTHONPATH=torch_bridge/python python3 bench/training_steps.py [--fallback] [--mode strict_eager]
"""
from __future__ import annotations

import argparse
import copy
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import vtpu


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)), inplace=True)
        y = self.bn2(self.conv2(y))
        return F.relu(y + (x if self.down is None else self.down(x)), inplace=True)


class ResNetStyle(nn.Module):
    """resnet18's layout (stem, four stages of two basic blocks), narrower, for 32x32 inputs."""

    def __init__(self, width=16, classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(inplace=True),
                                  nn.MaxPool2d(3, 2, 1))
        stages, cin = [], width
        for i, cout in enumerate((width, 2 * width, 4 * width, 8 * width)):
            stages += [BasicBlock(cin, cout, 1 if i == 0 else 2), BasicBlock(cout, cout, 1)]
            cin = cout
        self.stages = nn.Sequential(*stages)
        self.head = nn.Linear(cin, classes)

    def forward(self, x):
        x = self.stages(self.stem(x))
        return self.head(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class GPT2StyleBlock(nn.Module):
    """Token and position embeddings, one pre-norm GPT-2 block, a tied LM head."""

    def __init__(self, vocab=512, dim=128, heads=4, context=64):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, dim), nn.Embedding(context, dim)
        self.ln1, self.ln2, self.ln_f = nn.LayerNorm(dim), nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.fc, self.out = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)
        self.heads = heads
        self.drop = nn.Dropout(0.0)

    def forward(self, ids):
        b, t = ids.shape
        positions = torch.arange(t, device=ids.device)
        x = self.wte(ids) + self.wpe(positions)
        q, k, v = self.qkv(self.ln1(x)).split(x.shape[-1], dim=-1)
        q, k, v = (z.view(b, t, self.heads, -1).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.drop(self.proj(a.transpose(1, 2).reshape(b, t, -1)))
        x = x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))
        return self.ln_f(x) @ self.wte.weight.t()


def resnet_case():
    torch.manual_seed(0)
    model = ResNetStyle()
    data = torch.randn(8, 3, 32, 32), torch.randint(0, 10, (8,))

    def step(m, opt, batch):
        x, y = batch
        loss = F.cross_entropy(m(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    return model, data, lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, weight_decay=1e-4), step


def gpt2_case():
    torch.manual_seed(0)
    model = GPT2StyleBlock()
    ids = torch.randint(0, 512, (4, 64))

    def step(m, opt, ids):
        logits = m(ids)
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        return loss

    return model, ids, lambda p: torch.optim.AdamW(p, lr=1e-3), step


def to(batch, device):
    return tuple(t.to(device) for t in batch) if isinstance(batch, tuple) else batch.to(device)


def run(name, case, steps=2) -> dict:
    """Runs `steps` training steps on the CPU and on tpu; prints and returns what happened:
    stopped_at (the first error, or None), losses on both, and vtpu.stats() of the tpu steps."""
    model, batch, make_opt, step = case()
    cpu_model = copy.deepcopy(model)
    cpu_opt = make_opt(cpu_model.parameters())
    start = time.perf_counter()
    want = [step(cpu_model, cpu_opt, batch).item() for _ in range(steps)]
    cpu_seconds = time.perf_counter() - start
    tpu_model = model.to("tpu")
    tpu_opt = make_opt(tpu_model.parameters())
    tpu_batch = to(batch, "tpu")
    vtpu.synchronize()
    vtpu.reset_stats()
    start = time.perf_counter()
    try:
        got = [step(tpu_model, tpu_opt, tpu_batch).item() for _ in range(steps)]
    except NotImplementedError as error:
        print(f"{name}: stops at: {str(error).splitlines()[0]}")
        return {"stopped_at": str(error), "cpu_losses": want}
    host = time.perf_counter() - start
    s = vtpu.stats()
    diff = max(abs(a - b) for a, b in zip(got, want))
    print(f"{name}: {steps} steps ran; losses {[round(v, 5) for v in got]} (max |tpu - cpu| {diff:.2e}); "
          f"simulated {s['simulated_seconds'] * 1e3:.3f} ms in {s['kernels_launched']} kernels; "
          f"host {host:.2f} s vs CPU {cpu_seconds:.3f} s ({host / cpu_seconds:.0f}x)")
    print(f"  CPU fallbacks: {s['cpu_fallback_ops']} {dict(sorted(s['cpu_fallbacks'].items()))}")
    print(f"  ran as torch's decomposition: {dict(sorted(s['decomposed'].items()))}")
    return {"stopped_at": None, "cpu_losses": want, "tpu_losses": got, "stats": s}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fallback", action="store_true", help="allow the CPU fallback (counted)")
    parser.add_argument("--mode", default="defer_and_fuse")
    args = parser.parse_args()
    vtpu.set_mode(args.mode)
    vtpu.set_cpu_fallback(args.fallback)
    print(f"vtpu {vtpu.chip_name()}, mode {args.mode}, CPU fallback {'on' if args.fallback else 'off'}")
    results = [run("resnet18-style CNN", resnet_case), run("GPT-2-style block", gpt2_case)]
    native = [r["stopped_at"] is None and r["stats"]["cpu_fallback_ops"] == 0 for r in results]
    print(f"natively on the chip: {sum(native)} / {len(native)}")


if __name__ == "__main__":
    main()
