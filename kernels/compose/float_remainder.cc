#include "kernels/compose/float_remainder.h"

#include <limits>

namespace vtpu::kernels {
namespace {

constexpr int kShrinkRounds = 11;  // ratios up to 2^(23 + 22 * 11) > 2^254 / 2^-126
constexpr double kSignBit = -2147483648.0;

int constant(Graph& g, double value, const std::string& label) { return g.full({{1}, DType::F32}, value, label); }

// The biased exponent field of non-negative f32 x (0 for zeros and subnormals).
int exponent_field(Graph& g, int x, const std::string& label) { return g.binary_scalar(ExprOp::Shr, g.bits_of(x, label), 23, false, label); }

// x mod y for 0 <= x, 0 < y and x / y < 2^24: q = trunc(x / y) is the quotient or one more, so
// x - q y (one FMA, exact: the result is an f32) is the remainder or the remainder minus y.
int remainder_of_small_ratio(Graph& g, int x, int y, const std::string& label) {
  const int q = g.cast(g.cast(g.binary(ExprOp::Div, x, y, label), DType::I32, label), DType::F32, label);
  const int r = g.fma(g.unary(ExprOp::Neg, q, label), y, x, label);
  return g.where(g.binary_scalar(ExprOp::Lt, r, 0, false, label), g.binary(ExprOp::Add, r, y, label), r, label);
}

// fmod of |a| by |b| for finite a and non-zero finite b: >= 0.
int magnitude_remainder(Graph& g, int x, int y, const std::string& label) {
  // The shrinking rounds set exponent bits, so their divisor must be normal: a subnormal y is
  // replaced by y 2^24 (a multiple of it, so the remainder is kept), and one last small-ratio step
  // takes what is left modulo y itself.
  const int subnormal = g.binary_scalar(ExprOp::Lt, y, std::numeric_limits<float>::min(), false, label);
  const int normal_y = g.where(subnormal, g.binary_scalar(ExprOp::Mul, y, 16777216.0, false, label), y, label);
  const int y_exponent = exponent_field(g, normal_y, label);
  for (int round = 0; round < kShrinkRounds; ++round) {
    // d = the exponents' difference; past 23, x shrinks modulo y 2^(d - 22): the ratio stays below 2^23
    const int d = g.binary(ExprOp::Sub, exponent_field(g, x, label), y_exponent, label);
    const int shrink = g.binary_scalar(ExprOp::Gt, d, 23, false, label);
    const int shift = g.binary_scalar(ExprOp::Mul, g.binary_scalar(ExprOp::Sub, d, 22, false, label), 8388608, false, label);  // << 23
    const int big_divisor = g.float_from_bits(g.binary(ExprOp::Add, g.bits_of(normal_y, label), shift, label), label);
    x = g.where(shrink, remainder_of_small_ratio(g, x, g.where(shrink, big_divisor, normal_y, label), label), x, label);
  }
  return remainder_of_small_ratio(g, remainder_of_small_ratio(g, x, normal_y, label), y, label);
}

int is_nan(Graph& g, int x, const std::string& label) { return g.binary(ExprOp::Ne, x, x, label); }
int is_inf(Graph& g, int x, const std::string& label) {
  return g.binary_scalar(ExprOp::Eq, g.unary(ExprOp::Abs, x, label), std::numeric_limits<double>::infinity(), false, label);
}

int floor_of(Graph& g, int x, const std::string& label) {
  // |x| >= 2^23 (or inf, NaN) is already integral; below, truncate and step down for negatives
  const int t = g.cast(g.cast(x, DType::I32, label), DType::F32, label);
  const int f = g.binary(ExprOp::Sub, t, g.cast(g.binary(ExprOp::Gt, t, x, label), DType::F32, label), label);
  return g.where(g.binary_scalar(ExprOp::Lt, g.unary(ExprOp::Abs, x, label), 8388608.0, false, label), f, x, label);
}

}  // namespace

int fmod_f32(Graph& g, int a, int b, const std::string& label) {
  const int x = g.unary(ExprOp::Abs, a, label), y = g.unary(ExprOp::Abs, b, label);
  const int finite_y = g.where(is_inf(g, b, label), constant(g, 1, label), g.where(g.binary_scalar(ExprOp::Eq, y, 0, false, label), constant(g, 1, label), y, label), label);
  const int finite_x = g.where(is_inf(g, a, label), constant(g, 0, label), x, label);
  const int r = magnitude_remainder(g, finite_x, finite_y, label);
  // the sign of a (zeros too): its sign bit onto r's
  const int sign = g.binary_scalar(ExprOp::BitAnd, g.bits_of(a, label), kSignBit, false, label);
  const int signed_r = g.float_from_bits(g.binary(ExprOp::BitOr, g.bits_of(r, label), sign, label), label);
  const int undefined = g.binary(ExprOp::Or, g.binary(ExprOp::Or, is_nan(g, a, label), is_nan(g, b, label), label),
                                 g.binary(ExprOp::Or, is_inf(g, a, label), g.binary_scalar(ExprOp::Eq, b, 0, false, label), label), label);
  const int nan = constant(g, std::numeric_limits<double>::quiet_NaN(), label);
  return g.where(undefined, nan, g.where(is_inf(g, b, label), a, signed_r, label), label);
}

int remainder_f32(Graph& g, int a, int b, const std::string& label) {
  const int m = fmod_f32(g, a, b, label);
  const int moves = g.binary(ExprOp::And, g.binary_scalar(ExprOp::Ne, m, 0, false, label),
                             g.binary(ExprOp::Ne, g.binary_scalar(ExprOp::Lt, b, 0, false, label), g.binary_scalar(ExprOp::Lt, m, 0, false, label), label), label);
  return g.where(moves, g.binary(ExprOp::Add, m, b, label), m, label);
}

int floor_divide_f32(Graph& g, int a, int b, const std::string& label) {
  // torch's formula runs in the operands' dtype, each step rounded to it (bf16 and f16 nodes round
  // after every op); only fmod, exact and so representable in that dtype, is computed in f32.
  const DType dtype = g.node(a).type.dtype;
  const auto f32 = [&](int x) { return g.node(x).type.dtype == DType::F32 ? x : g.cast(x, DType::F32, label); };
  const int m = g.cast(fmod_f32(g, f32(a), f32(b), label), dtype, label);
  int div = g.binary(ExprOp::Div, g.binary(ExprOp::Sub, a, m, label), b, label);
  const int moves = g.binary(ExprOp::And, g.binary_scalar(ExprOp::Ne, m, 0, false, label),
                             g.binary(ExprOp::Ne, g.binary_scalar(ExprOp::Lt, b, 0, false, label), g.binary_scalar(ExprOp::Lt, m, 0, false, label), label), label);
  div = g.where(moves, g.binary_scalar(ExprOp::Sub, div, 1, false, label), div, label);
  const int floored = g.cast(floor_of(g, f32(div), label), dtype, label);
  const int rounded = g.where(g.binary_scalar(ExprOp::Gt, g.binary(ExprOp::Sub, div, floored, label), 0.5, false, label),
                              g.binary_scalar(ExprOp::Add, floored, 1, false, label), floored, label);
  // a zero quotient keeps the sign of a / b; a zero divisor gives IEEE's a / b
  const int quotient = g.binary(ExprOp::Div, a, b, label);
  const int zero_signed = g.float_from_bits(g.binary_scalar(ExprOp::BitAnd, g.bits_of(f32(quotient), label), kSignBit, false, label), label);
  const int r = g.where(g.binary_scalar(ExprOp::Ne, div, 0, false, label), rounded, g.cast(zero_signed, dtype, label), label);
  return g.where(g.binary_scalar(ExprOp::Eq, b, 0, false, label), quotient, r, label);
}

}  // namespace vtpu::kernels
