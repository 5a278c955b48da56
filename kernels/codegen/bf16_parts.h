// f32 values as bf16 parts for multi-pass MXU products (matmul.h's passes): part 0 is the value
// rounded, part 1 the rounding error rounded, part 2 what is left after that. Weights are stored
// as parts; an LHS is pushed part by part, each peeled off the f32 value on the vector unit (the
// MXU rounds what it is pushed to bf16, so a vreg holding "part p and the rest" pushes part p).
//
// Infinities and NaN: the leading pass (0, 0) multiplies the values as they are; every other pass
// multiplies the parts of the values with their non-finite elements replaced by 0
// (finite_form). Splitting an infinity as it is would make its part 1 inf - inf = NaN, and its
// part 0 times another value's part 1 (0 for any value bf16 holds exactly) inf * 0 = NaN, where
// the CPU's product is the infinity. So a kernel with more than one pass keeps two forms of an
// operand's part 0: as it is, for the leading pass, and finite, for the others.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/codegen/asm_writer.h"
#include "kernels/codegen/dtype.h"

namespace vtpu::kernels {

// The (A part, B part) products of each pass count, largest terms first: f32 operands are split
// into bf16 parts (part 0 = the value rounded, part 1 = the rounding error rounded, part 2 = the
// rest) and these pairs of parts are multiplied. Throws KernelError unless passes is 1, 3 or 6.
std::vector<std::pair<int, int>> mxu_pass_pairs(int passes);

// How many bf16 parts an operand of `dtype` is split into at `passes` MXU passes: the most parts
// any of mxu_pass_pairs(passes) reads. bf16 operands are their own single part; an f16 value
// (11 significant bits) is exactly the sum of two bf16 parts, so it never needs a third.
inline int bf16_part_count(DType dtype, int passes) {
  if (dtype == DType::BF16) return 1;
  const int parts = 1 + (passes >= 3) + (passes >= 6);
  return dtype == DType::F16 ? std::min(parts, 2) : parts;
}

// Stores vreg `x` as weights: with `finite_passes`, its part 0 as it is, then the `parts` parts of
// its finite form (mask and v`zero` as finite_form's), else its `parts` parts; each at s`addr` +
// offset + p * part_stride, rows `row_stride` bytes apart. Leaves x unchanged.
void store_weight_parts(AsmWriter& w, RegisterPool& vregs, RegisterPool& masks, int x, int addr, int64_t offset, int parts,
                        bool finite_passes, int zero, int64_t part_stride, int64_t row_stride);

// Stores the first `parts` bf16 parts of vreg `x` at s`addr` + offset + p * part_stride, rows
// `row_stride` bytes apart. Leaves x holding what is left after them.
void store_bf16_parts(AsmWriter& w, RegisterPool& vregs, int x, int addr, int64_t offset, int parts, int64_t part_stride,
                      int64_t row_stride);

// Whether passes other than the leading one read finite forms: whenever there is more than one.
inline bool has_finite_passes(const std::vector<std::pair<int, int>>& pairs) { return pairs.size() > 1; }

// An operand stored as weights keeps `parts` bf16 parts, and with finite passes its part 0 as it
// is ahead of them: stored part 0 is the part 0 the leading pass loads, stored part 1 + p the
// finite form's part p.
inline int stored_weight_parts(int parts, bool finite_passes) { return parts + finite_passes; }

// Whether the pass multiplying (LHS part, weight part) multiplies finite forms: with finite
// passes, every pass but the leading (0, 0).
inline bool multiplies_finite_forms(std::pair<int, int> pass, bool finite_passes) {
  return finite_passes && pass != std::pair{0, 0};
}

// Which stored weight part the pass multiplying (LHS part, weight part) loads.
inline int stored_weight_part(std::pair<int, int> pass, bool finite_passes) {
  return multiplies_finite_forms(pass, finite_passes) ? 1 + pass.second : pass.second;
}

// The LHS parts the passes of `pairs` multiply by stored weight part `b`, in increasing order (each
// peeled from the last).
std::vector<int> lhs_parts_against(const std::vector<std::pair<int, int>>& pairs, int b, bool finite_passes);

// LHS vregs x..x+count-1 (f32) made ready for the passes against stored weight part `b`: as they
// are for part 0 or without finite passes, else their finite forms, in place (finite_form's
// registers).
void lhs_for_weight_part(AsmWriter& w, RegisterPool& masks, int x, int count, int b, bool finite_passes, int zero,
                         int scratch);

// v`dst` = v`x` with its non-finite elements (infinities and NaN) replaced by 0: the form of a
// value every pass but the leading one multiplies (above). v`zero` holds 0; v`scratch` is
// clobbered; dst may be x. Three vector instructions: x - x is NaN exactly where x is not finite.
void finite_form(AsmWriter& w, RegisterPool& masks, int dst, int x, int zero, int scratch);

// Strips the leading parts off vregs x..x+count-1 (holding part `from`) until they hold part `to`.
void peel_bf16_parts(AsmWriter& w, RegisterPool& vregs, int x, int count, int from, int to);

}  // namespace vtpu::kernels
