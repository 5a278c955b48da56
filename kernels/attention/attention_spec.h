// What an attention call is, as the forward and backward kernels, the graph and the roofline
// bounds all read it: sizes, dtype, causality, scale and MXU passes, and the quantities derived
// from them alone.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/codegen/dtype.h"

namespace vtpu::kernels {

struct AttentionSpec {
  int64_t batch = 1;  // batch x heads: q is [batch, q_len, head_dim], k and v [batch, kv_len, head_dim]
  int64_t q_len = 0, kv_len = 0, head_dim = 0;  // head_dim at most the MXU width
  DType dtype = DType::F32;  // of q, k, v and out (f32 or bf16)
  bool causal = false;       // torch's is_causal: query i sees keys 0..i (top-left aligned)
  double scale = 1.0;        // scores = (q @ k^T) * scale
  int passes = 1;            // MXU passes for f32 inputs (1, 3 or 6, as matmul); bf16 takes 1
  bool write_lse = true;     // also write logsumexp(scores) per query, f32 [batch, q_len]
};

// Where the logsumexp starts in the output buffer (bytes): right after the attention output,
// 4-byte aligned. One buffer keeps the kernel a one-output graph node.
int64_t attention_lse_offset(const AttentionSpec& spec);

// FLOPs of the two products (the keys a causal query sees counted exactly): 4 * batch * head_dim
// * (query, key) pairs. What roofline bounds for attention are computed from.
double attention_flops(const AttentionSpec& spec);

// What the forward and backward kernels derive alike from a spec: queries padded to
// `query_multiple` rows, keys taken in blocks of `key_block` (an MXU width), each VMEM row of q,
// k and v `key_block` elements wide.
struct AttentionGeometry {
  AttentionGeometry() = default;
  // Throws KernelError when f32 passes are not 1, 3 or 6.
  AttentionGeometry(const AttentionSpec& spec, int64_t query_multiple, int64_t key_block);

  int element_bytes = 4;
  int parts = 1;                          // bf16 parts of each operand at the spec's passes
  std::vector<std::pair<int, int>> pairs; // the MXU pass pairs (one for bf16)
  // More than one pass: every pass but the leading one multiplies finite forms, and weights
  // keep their part 0 as it is besides (kernels/codegen/bf16_parts.h): stored_parts of them.
  bool finite_passes = false;
  int stored_parts = 1;
  int64_t row_bytes = 0;                  // one VMEM row of q, k or v
  int64_t q_pad = 0, kv_pad = 0;          // the lengths padded as above
  int64_t key_blocks = 0;
  bool ragged_keys = false;               // kv_len is not a whole number of key blocks
};

}  // namespace vtpu::kernels
