// Bit shifts of integers as torch's CPU kernels give them (ATen's lshift and rshift): for an
// amount 0 <= s < bits (the dtype's width), a << s wraps as unsigned arithmetic does, and a >> s
// is arithmetic, floor(a / 2^s); an amount outside that gives 0 for <<, and for >> a's sign
// (a >> (bits - 1)) for signed dtypes, 0 for unsigned ones. Values are int32 in the graph
// whatever torch's dtype: the caller wraps a narrower dtype's left shifts to it (and an int64
// caller keeps |a| 2^s below 2^31). The vector unit shifts only right, only logically and only
// by constants, so a tensor of amounts becomes 2^s, built in an f32's exponent bits, multiplied
// (wrapping) or floor-divided by (kernels/compose/integer_division.h).
#pragma once

#include <cstdint>
#include <string>

#include "kernels/graph/graph.h"

namespace vtpu::kernels {

// a << s and a >> s for int32 a and a tensor s of int32 amounts (broadcast against a).
int shift_left(Graph& g, int a, int s, int bits, const std::string& label = "shift_left");
int shift_right(Graph& g, int a, int s, int bits, bool is_signed, const std::string& label = "shift_right");

// The same by a constant amount.
int shift_left_by(Graph& g, int a, int64_t s, int bits, const std::string& label = "shift_left");
int shift_right_by(Graph& g, int a, int64_t s, int bits, bool is_signed,
                   const std::string& label = "shift_right");

}  // namespace vtpu::kernels
