// Integer powers as torch's CPU computes them (c10's powi): a^b by squaring and multiplying with
// int32's wrapping for b >= 0; for b < 0, 1 where a = 1, -1 or 1 by b's parity where a = -1, else
// 0. The f32 pow (exp(b log a)) rounds: (-7)^2 came out 48 and 3^19 off by 933.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/graph/graph.h"

namespace vtpu::kernels {

// a^b for int32 a and a tensor of int32 exponents b (broadcast against a); `exponent_bits` of b
// are run (31 for any int32; fewer where the caller knows every b below 2^exponent_bits).
int integer_power(Graph& g, int a, int b, int exponent_bits = 31, const std::string& label = "integer_power");

// a^b for a constant b >= 0 (torch refuses a negative constant exponent of an integer tensor).
int integer_power_by(Graph& g, int a, int64_t b, const std::string& label = "integer_power");

}  // namespace vtpu::kernels
