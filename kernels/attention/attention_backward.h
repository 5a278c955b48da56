// The fused attention backward (flash-attention 2 style): dq, dk and dv of
// out = softmax(q @ k^T * scale) @ v in one kernel, the probabilities recomputed from the
// forward's logsumexp and never written to HBM. Key blocks outside, query blocks inside:
// per (key block, 128-query block) the MXUs compute the scores, dout @ v^T, ds @ k (dq's share,
// added into a VMEM accumulator) and, through vtrans, p^T @ dout and ds^T @ q (dv's and dk's
// shares, kept in accumulator slots across the query blocks).
#pragma once

#include <cstdint>
#include <string>

#include "isa/program.h"
#include "kernels/attention/attention.h"
#include "sim/chip_config.h"

namespace vtpu::kernels {

// Empty when make_attention_backward serves `spec` on `chip`, else why not: bf16 or f32 inputs
// (f32 at 1, 3 or 6 MXU passes), four 128- or 256-wide MXUs per core, head_dim <= 128, a head's
// tensors within VMEM.
std::string attention_backward_unsupported(const AttentionSpec& spec, const sim::ChipConfig& chip);

// Kernel arguments: q, k, v, out, dout (spec.dtype, [batch, len, head_dim]), lse (f32
// [batch, q_len], the forward's), then grads: dq, dk and dv one after another in one buffer
// (spec.dtype; dk at batch * q_len * head_dim elements, dv batch * kv_len * head_dim later).
isa::Program make_attention_backward(const AttentionSpec& spec, const sim::ChipConfig& chip);

}  // namespace vtpu::kernels
