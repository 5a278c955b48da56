// See attention_spec.h.
#include "kernels/attention/attention_spec.h"

#include <algorithm>

#include "kernels/codegen/bf16_parts.h"
#include "kernels/codegen/vreg_shape.h"

namespace vtpu::kernels {

int64_t attention_lse_offset(const AttentionSpec& spec) {
  return round_up(spec.batch * spec.q_len * spec.head_dim * dtype_bytes(spec.dtype), 4);
}

double attention_flops(const AttentionSpec& spec) {
  double pairs = double(spec.q_len) * double(spec.kv_len);
  if (spec.causal) {  // query i sees min(i + 1, kv_len) keys
    const double full = double(std::max<int64_t>(0, spec.q_len - spec.kv_len));
    const double tri = double(std::min(spec.q_len, spec.kv_len));
    pairs = tri * (tri + 1) / 2 + full * double(spec.kv_len);
  }
  return 4.0 * double(spec.batch) * double(spec.head_dim) * pairs;
}

AttentionGeometry::AttentionGeometry(const AttentionSpec& spec, int64_t query_multiple, int64_t key_block)
    : element_bytes(dtype_bytes(spec.dtype)),
      parts(bf16_part_count(spec.dtype, spec.passes)),
      pairs(mxu_pass_pairs(spec.dtype == DType::F32 ? spec.passes : 1)),
      finite_passes(has_finite_passes(pairs)),
      stored_parts(stored_weight_parts(parts, finite_passes)),
      row_bytes(key_block * element_bytes),
      q_pad(round_up(spec.q_len, query_multiple)),
      kv_pad(round_up(spec.kv_len, key_block)),
      key_blocks(kv_pad / key_block),
      ragged_keys(kv_pad != spec.kv_len) {}

}  // namespace vtpu::kernels
