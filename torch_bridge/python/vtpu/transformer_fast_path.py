"""nn.TransformerEncoderLayer's inference fast path on tpu.

In eval mode torch sends an encoder layer on an accelerator (tpu included) to the fused
aten::_transformer_encoder_layer_fwd, which has CPU and CUDA kernels only. Here it is the layer's
standard computation in lowered ops (fused QKV projection, scaled_dot_product_attention with the
merged mask, output projection, residuals, layer norms before or after, the relu/gelu MLP), so the
chip runs the same math the standard path would, with the attention kernel of the chip."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from .python_kernels import register


def _attention_mask(mask, mask_type, batch, length, dtype):
    """torch's merged mask (0: [L, L] attention mask; 1: [B, L] key padding; 2: [B, H, L, L]) as
    an additive mask scaled_dot_product_attention broadcasts; True in a bool mask means masked."""
    if mask is None:
        return None
    if mask_type == 1:
        mask = mask.view(batch, 1, 1, length)
    if mask.dtype == torch.bool:
        mask = torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(mask, float("-inf"))
    return mask.to(dtype)


def transformer_encoder_layer_fwd(src, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias, use_gelu,
                                  norm_first, eps, norm_weight_1, norm_bias_1, norm_weight_2, norm_bias_2,
                                  ffn_weight_1, ffn_bias_1, ffn_weight_2, ffn_bias_2, mask=None, mask_type=None):
    batch, length, _ = src.shape

    def self_attention(x):
        q, k, v = (t.reshape(batch, length, num_heads, -1).transpose(1, 2)
                   for t in F.linear(x, qkv_weight, qkv_bias).chunk(3, dim=-1))
        attended = F.scaled_dot_product_attention(q, k, v, attn_mask=_attention_mask(mask, mask_type, batch, length, x.dtype))
        return F.linear(attended.transpose(1, 2).reshape(batch, length, embed_dim), proj_weight, proj_bias)

    def mlp(x):
        hidden = F.linear(x, ffn_weight_1, ffn_bias_1)
        return F.linear(F.gelu(hidden) if use_gelu else F.relu(hidden), ffn_weight_2, ffn_bias_2)

    def norm(x, weight, bias):
        return F.layer_norm(x, (embed_dim,), weight, bias, eps)

    x = src
    if norm_first:
        x = x + self_attention(norm(x, norm_weight_1, norm_bias_1))
        return x + mlp(norm(x, norm_weight_2, norm_bias_2))
    x = norm(x + self_attention(x), norm_weight_1, norm_bias_1)
    return norm(x + mlp(x), norm_weight_2, norm_bias_2)


register("_transformer_encoder_layer_fwd", transformer_encoder_layer_fwd, "PrivateUse1")
