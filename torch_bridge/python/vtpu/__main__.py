"""`python -m vtpu`: the environment report a bug report needs. Versions, how the extension was
built and where it was loaded from, the chip presets with their key figures, and the settings
(chip, mode, fusion, CPU fallback) this process runs with."""
import os
import sys

import torch

import vtpu


def report() -> str:
    info = vtpu._C.build_info()
    lines = [
        f"vtpu {vtpu.__version__}",
        f"torch {torch.__version__} (the extension was built against {info['torch_version']})",
        f"python {sys.version.split()[0]} ({sys.executable})",
        f"extension: {vtpu._C.__file__}",
        f"build: {info['build_type']}, sanitizers {info['sanitizers']}, vector extensions "
        f"{', '.join(info['vector_extensions']) or 'none'}, {info['compiler']}",
        "",
        f"settings: chip {vtpu.chip_name()} x {vtpu._C.device_count()}, mode {vtpu.get_mode()}, "
        f"fusion {vtpu.get_fusion()}, CPU fallback {'on' if vtpu._C.cpu_fallback_allowed() else 'off'}",
    ]
    set_vars = [f"{k}={v}" for k, v in sorted(os.environ.items()) if k.startswith("VTPU_")]
    lines.append("environment: " + (" ".join(set_vars) if set_vars else "no VTPU_* variables set"))
    lines += ["", "chip presets:",
              f"  {'name':5} {'cores':>5} {'MXUs':>9} {'bf16 TFLOP/s':>12} {'HBM GiB':>8} {'HBM GB/s':>9} "
              f"{'sustained':>9} {'VMEM MiB':>8}"]
    for c in vtpu._C.chip_presets():
        lines.append(f"  {c['name']:5} {c['tensor_cores']:>5} {c['mxu_per_core']:>3} x {c['mxu_dim']:>3} "
                     f"{c['peak_bf16_flops'] / 1e12:>12.0f} {c['hbm_bytes'] / 2**30:>8.0f} "
                     f"{c['hbm_bandwidth_bytes_per_s'] / 1e9:>9.0f} {c['hbm_efficiency']:>9.0%} "
                     f"{c['vmem_bytes'] / 2**20:>8.0f}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(report())
