// Integer matmuls on the MXU, exact as int32 arithmetic wraps (torch's integer mm and bmm, and
// _int_mm's int8 products summed in int32). The MXU multiplies bf16 values and sums them in f32,
// which hold integers exactly up to 256 and 2^24:
// - values of magnitude at most 256 (int8, the small counts of bookkeeping) go through as they
//   are, in K slices short enough that no sum reaches 2^24 (K bound^2 <= 2^24: 1024 for int8);
// - other int32 values split into their four bytes (0..255, two's complement), whose products of
//   byte planes p and q with p + q <= 3 are exact in K slices of 256 and weigh 2^(8(p + q))
//   modulo 2^32 (ten matmuls per slice).
// Each slice's f32 product is cast to int32 and the slices summed with int32's wrapping. A result
// that does not fit int32 is torch's int32 result (it wraps); an int64 caller checks its bounds.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/compose/integer_division.h"  // kAnyInt32
#include "kernels/graph/graph.h"

namespace vtpu::kernels {

constexpr int64_t kMxuExactInteger = 256;  // the largest magnitude bf16 holds every integer up to

// a [..., M, K] @ b [..., K, N] of int32 values (b may be [K, N], shared across a's batch), as
// int32; `bound` is at least every |a| and |b| (2^31: anything).
int integer_matmul(Graph& g, int a, int b, int64_t bound, const std::string& label = "integer_matmul");

}  // namespace vtpu::kernels
