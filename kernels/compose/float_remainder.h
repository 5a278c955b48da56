// fmod, torch.remainder and floor division of f32 values, exact as C's fmod and torch's formulas
// built on it. The remainder of a by b is always an f32, and an FMA gets it exactly from a quotient
// that f32 division rounds at most one too high, while that quotient stays below 2^24. Larger
// ratios first shrink the dividend modulo b * 2^k (a multiple of b, so the remainder is kept) for
// a power of two 2^k set in the exponent's bits: each round takes 22 bits off the ratio, so eleven
// rounds cover any pair of f32 values.
#pragma once

#include "kernels/graph/graph.h"

namespace vtpu::kernels {

// fmod(a, b) of f32 values (bf16 and f16 ones converted: their fmod is representable in them) (broadcast): the sign of a; NaN where b is 0 or a is infinite.
int fmod_f32(Graph& g, int a, int b, const std::string& label);
// torch.remainder: fmod moved by b where it is non-zero and its sign differs from b's.
int remainder_f32(Graph& g, int a, int b, const std::string& label);
// torch's floor division of floats (c10's div_floor_floating): (a - fmod) / b, corrected by one
// where the remainder's sign differs from b's, then rounded to the nearest integer it is close to.
// a and b of one float dtype (f32, bf16, f16): each step rounds to it, as torch's scalar type does.
int floor_divide_f32(Graph& g, int a, int b, const std::string& label);

}  // namespace vtpu::kernels
