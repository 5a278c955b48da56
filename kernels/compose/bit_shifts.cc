// See bit_shifts.h.
#include "kernels/compose/bit_shifts.h"

#include <algorithm>

#include <fmt/format.h>

#include "kernels/codegen/kernel_error.h"
#include "kernels/compose/integer_division.h"

namespace vtpu::kernels {
namespace {

constexpr double kInt32Min = -2147483648.0;  // 2^31 modulo 2^32, as an int32 constant holds it

void check(Graph& g, int a, int bits, const std::string& label) {
  if (g.node(a).type.dtype != DType::I32) throw KernelError(fmt::format("{}: shifts int32 values, not {}", label, to_string(g.node(a).type)));
  if (bits != 8 && bits != 16 && bits != 32 && bits != 64) throw KernelError(fmt::format("{}: {}-bit integers", label, bits));
}

// 2^s as int32 for amounts s in [0, 31] (2^31 as INT32_MIN, equal modulo 2^32): the f32 whose
// exponent bits are s + 127, converted; other amounts give what their clamp to [0, 31] gives.
int power_of_two(Graph& g, int s, const std::string& label) {
  const int clamped = g.binary_scalar(ExprOp::Min, g.binary_scalar(ExprOp::Max, s, 0, false, label), 31, false, label);
  const int exponent = g.binary_scalar(ExprOp::Mul, g.binary_scalar(ExprOp::Add, clamped, 127, false, label), 8388608, false, label);
  const int power = g.cast(g.float_from_bits(exponent, label), DType::I32, label);  // 2^31 saturates: replaced below
  return g.where(g.binary_scalar(ExprOp::Eq, clamped, 31, false, label), g.full({{1}, DType::I32}, kInt32Min, label), power, label);
}

int in_range(Graph& g, int s, int bits, const std::string& label) {
  return g.binary(ExprOp::And, g.binary_scalar(ExprOp::Ge, s, 0, false, label), g.binary_scalar(ExprOp::Lt, s, bits, false, label), label);
}

// a's sign as -1 or 0: a >> s for every s >= 31 while a is an int32.
int sign_fill(Graph& g, int a, const std::string& label) {
  return g.where(g.binary_scalar(ExprOp::Lt, a, 0, false, label), g.full({{1}, DType::I32}, -1, label),
                 g.full({{1}, DType::I32}, 0, label), label);
}

// Where an amount outside [0, bits) shifts: a signed value by bits - 1 (its sign), an unsigned one
// (never negative) by 31 (0). From 31 on, an int32 keeps only its sign.
int out_of_range_amount(int bits, bool is_signed) { return is_signed ? bits - 1 : 31; }

}  // namespace

int shift_left(Graph& g, int a, int s, int bits, const std::string& label) {
  check(g, a, bits, label);
  const int shifted = g.binary(ExprOp::Mul, a, power_of_two(g, s, label), label);  // past 31: 0 below too
  return g.where(g.binary(ExprOp::And, in_range(g, s, bits, label), g.binary_scalar(ExprOp::Lt, s, 32, false, label), label),
                 shifted, g.full({{1}, DType::I32}, 0, label), label);
}

int shift_right(Graph& g, int a, int s, int bits, bool is_signed, const std::string& label) {
  check(g, a, bits, label);
  const int amount =
      g.where(in_range(g, s, bits, label), s, g.full({{1}, DType::I32}, double(out_of_range_amount(bits, is_signed)), label), label);
  const int capped = g.binary_scalar(ExprOp::Min, amount, 30, false, label);
  const int quotient = floor_divide_by(g, a, power_of_two(g, capped, label), label).quotient;
  return g.where(g.binary_scalar(ExprOp::Ge, amount, 31, false, label), sign_fill(g, a, label), quotient, label);
}

int shift_left_by(Graph& g, int a, int64_t s, int bits, const std::string& label) {
  check(g, a, bits, label);
  if (s < 0 || s >= std::min(bits, 32)) return g.binary_scalar(ExprOp::Mul, a, 0, false, label);
  return g.binary_scalar(ExprOp::Mul, a, s == 31 ? kInt32Min : double(int64_t{1} << s), false, label);
}

int shift_right_by(Graph& g, int a, int64_t s, int bits, bool is_signed, const std::string& label) {
  check(g, a, bits, label);
  if (s < 0 || s >= bits) s = out_of_range_amount(bits, is_signed);
  if (s == 0) return a;
  if (s >= 31) return sign_fill(g, a, label);
  // the logical shift, with the sign's copies filling the top s bits of a negative a
  const int logical = g.binary_scalar(ExprOp::Shr, a, double(s), false, label);
  const double top_bits = -double(int64_t{1} << (32 - s));
  return g.where(g.binary_scalar(ExprOp::Lt, a, 0, false, label), g.binary_scalar(ExprOp::BitOr, logical, top_bits, false, label), logical,
                 label);
}

}  // namespace vtpu::kernels
