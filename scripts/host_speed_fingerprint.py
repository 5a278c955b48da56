"""Fingerprints of what the simulator computes, so a host-speed change can prove it changed
nothing the user sees: for each workload, a SHA-256 of every output's bytes and the simulated
seconds and kernel count. The workloads are the README demo's model (examples/demo_model.py,
forward in defer_and_fuse), bench/eager_modes.py's step (forward and backward, both eager modes:
loss and every gradient), causal attention forward and backward, and matmuls of the roofline's
kinds (bf16, f32 at 1, 3 and 6 MXU passes, ragged shapes, a batched one), on the chip VTPU_CHIP
names.

tests/python/test_host_speed_fingerprint.py compares a fresh run against
tests/python/data/host_speed_fingerprint.json, which this script wrote with the code from before
the host-speed work (`--write`), one process per chip. Regenerate it only for a change that means
to alter numerics or cycles, and say so in the commit.
Usage: PYTHONPATH=torch_bridge/python python3 scripts/host_speed_fingerprint.py [--write]
"""
from __future__ import annotations

import hashlib
import json
import os
import pathlib
import subprocess
import sys

import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
RECORD = ROOT / "tests" / "python" / "data" / "host_speed_fingerprint.json"
CHIPS = ("v5e", "v6e")  # a 128- and a 256-wide MXU
sys.path.insert(0, str(ROOT / "examples"))


def digest(tensors) -> str:
    h = hashlib.sha256()
    for t in tensors:
        t = t.detach().cpu().contiguous()
        h.update(str((t.dtype, tuple(t.shape))).encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def measured(run) -> dict:
    import vtpu
    vtpu.synchronize()
    vtpu.reset_stats()
    outputs = run()
    vtpu.synchronize()
    stats = vtpu.stats()
    return {"outputs": digest(outputs), "simulated_seconds": stats["simulated_seconds"],
            "kernels": stats["kernels_launched"]}


def demo() -> dict:
    import vtpu
    from demo_model import Block
    vtpu.set_mode("defer_and_fuse")
    torch.manual_seed(0)
    model = torch.nn.Sequential(Block(), Block()).eval().to("tpu")
    x = torch.randn(2, 64, 128).to("tpu")
    with torch.no_grad():
        return measured(lambda: [model(x)])


def eager_step(mode: str) -> dict:
    import vtpu
    from demo_model import Block
    vtpu.set_mode(mode)
    torch.manual_seed(0)
    model = torch.nn.Sequential(Block(), Block()).to("tpu")
    x = torch.randn(2, 64, 128).to("tpu")

    def run():
        loss = model(x).square().mean()
        loss.backward()
        return [loss] + [p.grad for p in model.parameters()]
    return measured(run)


def attention(dtype) -> dict:
    """The fused attention kernels, forward and backward (causal SDPA)."""
    import vtpu
    vtpu.set_mode("defer_and_fuse")
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 256, 64, dtype=dtype).to("tpu").requires_grad_() for _ in range(3))

    def run():
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        out.square().sum().backward()
        return [out, q.grad, k.grad, v.grad]
    return measured(run)


# (name, a shape, b shape, dtype, float32 matmul precision)
MATMULS = [
    ("bf16 512x384x640", (512, 384), (384, 640), torch.bfloat16, "highest"),
    ("bf16 ragged 200x130x300", (200, 130), (130, 300), torch.bfloat16, "highest"),
    ("f32 6-pass 256x256x384", (256, 256), (256, 384), torch.float32, "highest"),
    ("f32 3-pass 136x520x264", (136, 520), (520, 264), torch.float32, "high"),
    ("f32 1-pass 128x256x128", (128, 256), (256, 128), torch.float32, "medium"),
    ("bf16 batched 4x96x128x160", (4, 96, 128), (4, 128, 160), torch.bfloat16, "highest"),
]


def matmul(a_shape, b_shape, dtype, precision) -> dict:
    import vtpu
    vtpu.set_mode("strict_eager")
    torch.manual_seed(0)
    a, b = torch.randn(a_shape, dtype=dtype).to("tpu"), torch.randn(b_shape, dtype=dtype).to("tpu")
    torch.set_float32_matmul_precision(precision)
    try:
        return measured(lambda: [a @ b])
    finally:
        torch.set_float32_matmul_precision("highest")


def fingerprint() -> dict:
    """Every workload's fingerprint on this process's chip."""
    result = {"demo": demo()}
    for mode in ("strict_eager", "defer_and_fuse"):
        result[f"eager_modes {mode}"] = eager_step(mode)
    for dtype in (torch.bfloat16, torch.float32):
        result[f"attention {dtype}"] = attention(dtype)
    for name, a_shape, b_shape, dtype, precision in MATMULS:
        result[f"matmul {name}"] = matmul(a_shape, b_shape, dtype, precision)
    return result


def fingerprint_on(chip: str) -> dict:
    """Runs fingerprint() in a fresh process on `chip` (the chip is fixed per process)."""
    build = pathlib.Path(os.environ.get("VTPU_BUILD_DIR", ROOT / "build"))
    path = os.pathsep.join([str(ROOT / "torch_bridge" / "python"), str(build / "torch_bridge")])
    env = dict(os.environ, VTPU_CHIP=chip, VTPU_CPU_FALLBACK="0", PYTHONPATH=path)
    out = subprocess.run([sys.executable, __file__, "--print"], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def main() -> None:
    if "--print" in sys.argv:
        import vtpu  # noqa: F401
        print(json.dumps(fingerprint()))
        return
    record = {chip: fingerprint_on(chip) for chip in CHIPS}
    if "--write" in sys.argv:
        RECORD.parent.mkdir(parents=True, exist_ok=True)
        RECORD.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
        print(f"wrote {RECORD}")
    else:
        print(json.dumps(record, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
