"""The Pallas TPU tutorial's blocked matmul (jax docs/pallas/tpu/matmul) written with vtpu.pallas:
bf16 (or f32) blocks, an f32 VMEM accumulator kept across the grid's last axis (K), initialised
on the first K step and written out on the last. bench/pallas_matmul.py times it against the
tutorial's published v5e figures; tests/python/test_pallas.py checks it against the CPU.

    python3 examples/pallas_matmul.py     # a 1024^3 product on tpu, against the CPU
"""
import torch

from vtpu import pallas as pl


def matmul_kernel(x_ref, y_ref, z_ref, acc_ref):
    @pl.when(pl.program_id(2) == 0)
    def _():
        acc_ref[...] = 0.0

    acc_ref[...] += pl.dot(x_ref[...], y_ref[...])

    @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
    def _():
        z_ref[...] = acc_ref[...].astype(z_ref.dtype)


def blocked_matmul(m: int, k: int, n: int, bm: int, bk: int, bn: int, dtype=torch.bfloat16, chip: str = ""):
    """x (m, k) @ y (k, n) in (bm, bk) x (bk, bn) blocks; `chip` generates for a preset."""
    return pl.pallas_call(
        matmul_kernel, out_shape=pl.ShapeDtype((m, n), dtype), grid=(m // bm, n // bn, k // bk),
        in_specs=[pl.BlockSpec((bm, bk), lambda i, j, k: (i, k)), pl.BlockSpec((bk, bn), lambda i, j, k: (k, j))],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, k: (i, j)), scratch_shapes=[pl.VMEM((bm, bn), torch.float32)],
        chip=chip)


if __name__ == "__main__":
    import vtpu
    x, y = torch.randn(1024, 1024).bfloat16(), torch.randn(1024, 1024).bfloat16()
    vtpu.reset_stats()
    z = blocked_matmul(1024, 1024, 1024, 512, 1024, 1024)(x.to("tpu"), y.to("tpu")).cpu()
    expected = x.float() @ y.float()
    error = ((z.float() - expected).abs() / expected.abs().clamp_min(1)).max().item()
    print(f"largest error against the CPU {error:.2g} (relative; z is bf16: up to 2^-8); "
          f"simulated {vtpu.stats()['per_kernel']['matmul_kernel']['cycles']} cycles")
