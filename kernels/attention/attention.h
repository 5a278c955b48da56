// Fused scaled dot-product attention, flash-attention style: out = softmax(q @ k^T * scale) @ v
// in one kernel whose scores and probabilities never leave VMEM. Keys are taken one MXU-wide
// block at a time with an online softmax (running row maximum and sum, the partial output
// rescaled when the maximum moves), so memory is linear in the sequence lengths.
#pragma once

#include <cstdint>
#include <string>

#include "isa/program.h"
#include "kernels/attention/attention_spec.h"
#include "sim/chip_config.h"

namespace vtpu::kernels {

// Kernel arguments: q, k, v, out (the attention [batch, q_len, head_dim], then with write_lse the
// logsumexp at attention_lse_offset). Sizes are the spec's (one program per shape). Throws KernelError for shapes it does not serve (head_dim over the MXU width, a
// head's tensors not fitting VMEM).
isa::Program make_attention(const AttentionSpec& spec, const sim::ChipConfig& chip);

// Empty when make_attention serves `spec` on `chip`, else why not (for the bridge's choice of
// the math path).
std::string attention_unsupported(const AttentionSpec& spec, const sim::ChipConfig& chip);

}  // namespace vtpu::kernels
