// Floor division and its remainder of int32 values by a constant, as torch's `//` and `%` give
// them for integers: the quotient estimated in f32, truncated, then corrected once each way with
// exact int32 arithmetic (r = a - q b must lie in [0, b) for b > 0, (b, 0] for b < 0). Exact
// while |a| < 2^24 (the f32 estimate is then within one of the quotient) and b != 0; the caller
// checks both.
#pragma once

#include <cstdint>

#include "kernels/graph/graph.h"

namespace vtpu::kernels {

struct FloorDivision {
  int quotient;   // I32, floor(a / b)
  int remainder;  // I32, a - b floor(a / b): the sign of b, as torch.remainder
};

FloorDivision floor_divide(Graph& g, int a, int64_t b, const std::string& label = "floor_divide");

// The same by a tensor of int32 divisors b (broadcast against a), each corrected by its own sign;
// exact while |a| and |b| are below 2^24 and no b is zero (the caller checks).
FloorDivision floor_divide_by(Graph& g, int a, int b, const std::string& label = "floor_divide");

}  // namespace vtpu::kernels
