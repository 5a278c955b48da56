"""Grouped-query attention (`F.scaled_dot_product_attention(..., enable_gqa=True)`, Llama 3,
Mistral, Qwen, Gemma) on the fused attention kernel. torch serves a backend's fused attention
only with as many key/value heads as query heads, so on tpu tensors SDPA with fewer key/value
heads runs, above autograd, as torch's own composite with each key/value head repeated for its
group of query heads (what torch's math path does too): the kernel and its backward then serve
it, and autograd sums the repeated heads' gradients. The repeat is a copy a real TPU kernel would
not make (it indexes the shared head): its HBM traffic is simulated time a chip would not spend.

Without a causal mask (decode: one new token against the cache, or cross-attention) no repeat is
needed: each key/value head's group of query heads is folded into the query rows, as TPU decode
kernels do, and one attention per key/value head reads its keys once. The math is the same: every
query row attends to the same keys with the same mask, whatever its head in the group.
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
    if enable_gqa and _foldable(query, key, attn_mask, is_causal) and heads != kv_heads and heads % kv_heads == 0:
        return _folded(query, key, value, attn_mask, dropout_p, scale)
    if enable_gqa and query.dim() >= 3 and kv_heads != heads and kv_heads > 0 and heads % kv_heads == 0:
        key = key.repeat_interleave(heads // kv_heads, dim=-3)
        value = value.repeat_interleave(heads // kv_heads, dim=-3)
        enable_gqa = False
    return aten.scaled_dot_product_attention.default.decompose(query, key, value, attn_mask, dropout_p, is_causal,
                                                               scale=scale, enable_gqa=enable_gqa)


def _foldable(query, key, attn_mask, is_causal) -> bool:
    """Folding keeps the math when no row's mask depends on its head: no causal mask (whose
    diagonal follows the row index), and a mask, if any, shared by every head."""
    if is_causal or query.dim() != 4 or key.dim() != 4 or key.size(1) == 0:
        return False
    return attn_mask is None or (attn_mask.dim() == 4 and attn_mask.size(1) == 1)


def _folded(query, key, value, attn_mask, dropout_p, scale):
    batch, heads, rows, depth = query.shape
    kv_heads = key.size(1)
    group = heads // kv_heads
    # Query head h = j * group + g reads key/value head j (repeat_interleave's order).
    q = query.reshape(batch, kv_heads, group * rows, depth)
    if attn_mask is not None:
        mask = attn_mask.expand(attn_mask.size(0), 1, rows, attn_mask.size(-1))
        attn_mask = mask.unsqueeze(2).expand(-1, -1, group, -1, -1).reshape(mask.size(0), 1, group * rows, mask.size(-1))
    out = aten.scaled_dot_product_attention.default.decompose(q, key, value, attn_mask, dropout_p, False, scale=scale)
    return out.reshape(batch, heads, rows, value.size(-1))


_library.impl(aten.scaled_dot_product_attention.default, scaled_dot_product_attention, "AutogradPrivateUse1")
