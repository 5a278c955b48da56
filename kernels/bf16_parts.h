// f32 values as bf16 parts for multi-pass MXU products (matmul.h's passes): part 0 is the value
// rounded, part 1 the rounding error rounded, part 2 what is left after that. Weights are stored
// as parts; an LHS is pushed part by part, each peeled off the f32 value on the vector unit (the
// MXU rounds what it is pushed to bf16, so a vreg holding "part p and the rest" pushes part p).
#pragma once

#include <cstdint>

#include "kernels/asm_writer.h"

namespace vtpu::kernels {

// Stores the first `parts` bf16 parts of vreg `x` at s`addr` + offset + p * part_stride, rows
// `row_stride` bytes apart. Leaves x holding what is left after them.
void store_bf16_parts(AsmWriter& w, RegisterPool& vregs, int x, int addr, int64_t offset, int parts, int64_t part_stride,
                      int64_t row_stride);

// Strips the leading parts off vregs x..x+count-1 (holding part `from`) until they hold part `to`.
void peel_bf16_parts(AsmWriter& w, RegisterPool& vregs, int x, int count, int from, int to);

}  // namespace vtpu::kernels
