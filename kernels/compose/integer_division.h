// Floor division and its remainder of int32 values, as torch's `//` and `%` give them for
// integers, exact for every int32 a and nonzero b: the quotient estimated in f32 and truncated;
// where that estimate can be off by more than one (|a| or |b| of 2^24 or more: their f32 forms
// round), refined once by the f32 quotient of the exact remainder a - q b; then corrected once each
// way with exact int32 arithmetic (r = a - q b must lie in [0, b) for b > 0, (b, 0] for b < 0).
// INT32_MIN // -1 wraps to INT32_MIN, as int32 arithmetic does. The caller checks b != 0.
#pragma once

#include <cstdint>

#include "kernels/graph/graph.h"

namespace vtpu::kernels {

struct FloorDivision {
  int quotient;   // I32, floor(a / b)
  int remainder;  // I32, a - b floor(a / b): the sign of b, as torch.remainder
};

// The largest |a| or |b| for which f32 holds a and b exactly, so their f32 quotient, rounded once,
// is within one of the floor quotient and no refinement is needed.
constexpr int64_t kF32ExactIntegers = int64_t{1} << 24;
constexpr int64_t kAnyInt32 = int64_t{1} << 31;

// a // b for a constant b; `a_bound` (at least every |a|) lets small dividends skip the refinement.
FloorDivision floor_divide(Graph& g, int a, int64_t b, const std::string& label = "floor_divide",
                           int64_t a_bound = kAnyInt32);

// The same by a tensor of int32 divisors b (broadcast against a), each corrected by its own sign;
// no b may be zero (the caller checks). `bound` is at least every |a| and |b|.
FloorDivision floor_divide_by(Graph& g, int a, int b, const std::string& label = "floor_divide",
                              int64_t bound = kAnyInt32);

}  // namespace vtpu::kernels
