#include "kernels/compose/integer_division.h"

#include <functional>

#include <fmt/format.h>

#include "kernels/codegen/kernel_error.h"

namespace vtpu::kernels {
namespace {

// What differs between a constant divisor and a tensor of them: each step below in terms of b.
struct Divisor {
  std::function<int(int)> times;       // q b, wrapping int32
  std::function<int(int)> into;        // trunc(f32(x) / f32(b)) as int32 (saturating)
  std::function<int(int)> reached;     // the remainder r is b or more past zero, on b's side
  std::function<int(int)> wrong_sign;  // r is nonzero with the sign opposite to b's
  std::function<int(int)> plus;        // r + b
};

FloorDivision divide(Graph& g, int a, const Divisor& b, bool refine, const std::string& label) {
  const auto remainder_of = [&](int q) { return g.binary(ExprOp::Sub, a, b.times(q), label); };
  int estimate = b.into(a);
  if (refine) {
    // a / b - estimate is below 2^9 (f32's relative error 2^-24 of at most 2^31) and a - estimate b
    // fits int32 (it overflows only for |b| near 2^31, where the estimate is -1, 0 or 1 and exact
    // to within one: f32's rounding keeps |a| <= |b| as |f32(a)| <= |f32(b)|), so its f32 quotient
    // by b is within one of the rest of the quotient
    estimate = g.binary(ExprOp::Add, estimate, b.into(remainder_of(estimate)), label);
  }
  // one step up when the remainder reached b (the estimate rounded down past the quotient)
  const int r0 = remainder_of(estimate);
  const int q1 = g.where(b.reached(r0), g.binary_scalar(ExprOp::Add, estimate, 1, false, label), estimate, label);
  // one step down when the remainder has the wrong sign (truncation toward zero, or rounding up)
  const int r1 = remainder_of(q1);
  const int down = b.wrong_sign(r1);
  return {g.where(down, g.binary_scalar(ExprOp::Sub, q1, 1, false, label), q1, label), g.where(down, b.plus(r1), r1, label)};
}

int f32(Graph& g, int x, const std::string& label) { return g.cast(x, DType::F32, label); }

}  // namespace

FloorDivision floor_divide(Graph& g, int a, int64_t b, const std::string& label, int64_t a_bound) {
  if (b == 0) throw KernelError(fmt::format("{}: division by zero", label));
  if (g.node(a).type.dtype != DType::I32) throw KernelError(fmt::format("{}: expects int32 values", label));
  const double d = double(b);
  const auto compare = [&](ExprOp positive, ExprOp negative, double with) {
    return [&g, &label, op = b > 0 ? positive : negative, with](int r) { return g.binary_scalar(op, r, with, false, label); };
  };
  const Divisor divisor{
      [&](int q) { return g.binary_scalar(ExprOp::Mul, q, d, false, label); },
      [&](int x) { return g.cast(g.binary_scalar(ExprOp::Div, f32(g, x, label), d, false, label), DType::I32, label); },
      compare(ExprOp::Ge, ExprOp::Le, d), compare(ExprOp::Lt, ExprOp::Gt, 0),
      [&](int r) { return g.binary_scalar(ExprOp::Add, r, d, false, label); }};
  return divide(g, a, divisor, a_bound > kF32ExactIntegers || std::abs(b) > kF32ExactIntegers, label);
}

FloorDivision floor_divide_by(Graph& g, int a, int b, const std::string& label, int64_t bound) {
  if (g.node(a).type.dtype != DType::I32 || g.node(b).type.dtype != DType::I32) {
    throw KernelError(fmt::format("{}: expects int32 values and divisors", label));
  }
  const int positive = g.binary_scalar(ExprOp::Gt, b, 0, false, label), b_f32 = f32(g, b, label);
  // the comparisons chosen per element by b's sign
  const Divisor divisor{
      [&](int q) { return g.binary(ExprOp::Mul, q, b, label); },
      [&](int x) { return g.cast(g.binary(ExprOp::Div, f32(g, x, label), b_f32, label), DType::I32, label); },
      [&](int r) { return g.where(positive, g.binary(ExprOp::Ge, r, b, label), g.binary(ExprOp::Le, r, b, label), label); },
      [&](int r) {
        return g.where(positive, g.binary_scalar(ExprOp::Lt, r, 0, false, label), g.binary_scalar(ExprOp::Gt, r, 0, false, label), label);
      },
      [&](int r) { return g.binary(ExprOp::Add, r, b, label); }};
  return divide(g, a, divisor, bound > kF32ExactIntegers, label);
}

}  // namespace vtpu::kernels
