"""torch.compile of float32 and float16 grouped matmuls (Hugging Face's mixture-of-experts layers:
Mixtral, Qwen-MoE, GPT-OSS, ...).

torch 2.13's meta function for aten::_grouped_mm repeats the CUDA kernel's checks, bf16 inputs
only, while its CPU kernel, and the chip through its decomposition, compute float32 and float16
too. Dynamo traces with fake tensors, which run the meta function, so compiling any such model
failed ("Expected inputs of BF16 type", on the CPU as on tpu) where eager ran. Here the meta
function takes float32 and float16 pairs as well: torch's own checks and shapes run on bf16
stand-ins, and the output has the inputs' dtype (or out_dtype), as the CPU kernel's. It replaces
the three places torch keeps that meta function: the Python dispatcher's kernel, which fake
tensors use; the decomposition table's meta entry; and the dispatcher's Meta kernel.
"""
from __future__ import annotations

import torch
from torch._decomp import meta_table
from torch._meta_registrations import meta_grouped_mm

_OP = torch.ops.aten._grouped_mm.default


def grouped_mm_meta(mat_a, mat_b, offs=None, bias=None, out_dtype=None):
    if mat_a.dtype in (torch.float32, torch.float16) and mat_b.dtype == mat_a.dtype:
        bf16 = torch.bfloat16
        shaped = meta_grouped_mm(mat_a.to(bf16), mat_b.to(bf16), offs=offs, bias=bias, out_dtype=bf16)
        return torch.empty(shaped.shape, dtype=out_dtype or mat_a.dtype, device=shaped.device)
    return meta_grouped_mm(mat_a, mat_b, offs=offs, bias=bias, out_dtype=out_dtype)


_OP.py_kernels[torch._C.DispatchKey.Meta] = grouped_mm_meta
_OP._dispatch_cache.clear()
meta_table[_OP] = grouped_mm_meta
_library = torch.library.Library("aten", "IMPL")
_library.impl("_grouped_mm", grouped_mm_meta, "Meta")
