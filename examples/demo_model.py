"""The README demo: a small transformer-style model on device "tpu" in defer_and_fuse mode.

Prints the output next to the CPU's, the simulated time and where it went, and writes a Perfetto
trace (open it at ui.perfetto.dev). Usage: python examples/demo_model.py [out_dir]
"""
import pathlib
import sys

import torch

import vtpu


class Block(torch.nn.Module):
    """Pre-norm transformer block: attention then MLP, both with residuals."""

    def __init__(self, dim=128, heads=4, hidden=512):
        super().__init__()
        self.heads = heads
        self.norm1 = torch.nn.LayerNorm(dim)
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.proj = torch.nn.Linear(dim, dim)
        self.norm2 = torch.nn.LayerNorm(dim)
        self.up = torch.nn.Linear(dim, hidden)
        self.down = torch.nn.Linear(hidden, dim)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).chunk(3, dim=-1)
        split = lambda t: t.reshape(b, s, self.heads, d // self.heads).transpose(1, 2).reshape(b * self.heads, s, -1)
        q, k, v = split(q), split(k), split(v)
        attn = torch.softmax(q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5, dim=-1) @ v
        attn = attn.reshape(b, self.heads, s, -1).transpose(1, 2).reshape(b, s, d)
        x = x + self.proj(attn)
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm2(x))))


def main(out_dir: pathlib.Path) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(Block(), Block()).eval()
    x = torch.randn(2, 64, 128)
    with torch.no_grad():
        expected = model(x)
        model_tpu = model.to("tpu")
        vtpu.reset_stats()
        out_dir.mkdir(parents=True, exist_ok=True)
        trace_path = out_dir / "model_trace.json"
        with vtpu.trace(str(trace_path)):
            got = model_tpu(x.to("tpu")).cpu()
    stats = vtpu.stats()
    print(f"2 transformer blocks on a simulated {vtpu.chip_name()} ({vtpu.get_mode()}), input {tuple(x.shape)}")
    print(f"  output[0, 0, :5] on tpu: {got[0, 0, :5].numpy()}")
    print(f"  output[0, 0, :5] on cpu: {expected[0, 0, :5].numpy()}")
    err = (got - expected).abs().max().item()
    print(f"  max |tpu - cpu| = {err:.2e}")
    print(f"  simulated time {stats['simulated_seconds'] * 1e6:.1f} us in {stats['kernels_launched']} kernels "
          f"({stats['ops_recorded']} aten ops recorded, {stats['ops_fused_away']} fused away, "
          f"{stats['flushes']} flush(es)); HBM traffic {(stats['hbm_read_bytes'] + stats['hbm_write_bytes']) / 1e6:.2f} MB")
    print(f"  non-contiguous views made dense on the host: {stats['host_relayouts']}; CPU fallbacks: "
          f"{stats['cpu_fallback_ops']}")
    print(f"  trace: {trace_path} (open in ui.perfetto.dev)")
    if err > 1e-3:
        sys.exit(f"mismatch: {err}")


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "out"))
