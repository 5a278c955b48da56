"""Grouped-query attention (`F.scaled_dot_product_attention(..., enable_gqa=True)`, Llama 3,
Mistral, Qwen, Gemma) on the fused attention kernel. torch serves a backend's fused attention
only with as many key/value heads as query heads, so on tpu tensors SDPA with fewer key/value
heads runs, above autograd, as torch's own composite with each key/value head repeated for its
group of query heads (what torch's math path does too): the kernel and its backward then serve
it, and autograd sums the repeated heads' gradients. The repeat is a copy a real TPU kernel would
not make (it indexes the shared head): its HBM traffic is simulated time a chip would not spend.
"""
from __future__ import annotations

import torch

aten = torch.ops.aten
# Registered directly, not through python_kernels.register: torch's composite makes the input
# checks itself, and the meta-tensor check there cannot take the symbolic sizes of a dynamic
# torch.compile trace.
_library = torch.library.Library("aten", "IMPL")


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    heads, kv_heads = query.size(-3) if query.dim() >= 3 else 1, key.size(-3) if key.dim() >= 3 else 1
    if enable_gqa and query.dim() >= 3 and kv_heads != heads and kv_heads > 0 and heads % kv_heads == 0:
        key = key.repeat_interleave(heads // kv_heads, dim=-3)
        value = value.repeat_interleave(heads // kv_heads, dim=-3)
        enable_gqa = False
    return aten.scaled_dot_product_attention.default.decompose(query, key, value, attn_mask, dropout_p, is_causal,
                                                               scale=scale, enable_gqa=enable_gqa)


_library.impl(aten.scaled_dot_product_attention.default, scaled_dot_product_attention, "AutogradPrivateUse1")
