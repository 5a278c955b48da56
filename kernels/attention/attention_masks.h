// What the attention forward and backward kernels share: their constant vregs and the masking of
// keys a query does not see (past a causal query, or past the last key of a ragged block).
#pragma once

#include <cstdint>

#include "kernels/codegen/asm_writer.h"
#include "kernels/attention/attention_spec.h"

namespace vtpu::kernels {

// Constant vregs: zeros, -inf, the scale and, when masks are needed, each element's lane and lane
// minus sublane (as f32: in a tile of queries q0.. against keys k0.., element (s, l) is a key
// past its causal query when l - s > q0 - k0, past the last key when l > last - k0). -1 where
// not needed.
struct AttentionConstants {
  int zero = -1, neg_inf = -1, scale = -1, lane = -1, lane_minus_sub = -1;
};
AttentionConstants emit_attention_constants(AsmWriter& w, RegisterPool& vregs, const AttentionSpec& spec, bool ragged_keys,
                                            int scratch);

// x = -inf where the constant vreg `position` (lane or lane_minus_sub) > s`base` + offset, through
// vreg `th`, scalar `scratch` and mask register `mask`.
void mask_keys_past(AsmWriter& w, const AttentionConstants& c, int x, int base, int64_t offset, int position, int th, int scratch,
                    int mask);

}  // namespace vtpu::kernels
