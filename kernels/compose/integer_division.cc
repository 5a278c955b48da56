#include "kernels/compose/integer_division.h"

#include <fmt/format.h>

#include "kernels/codegen/kernel_error.h"

namespace vtpu::kernels {

FloorDivision floor_divide(Graph& g, int a, int64_t b, const std::string& label) {
  if (b == 0) throw KernelError(fmt::format("{}: division by zero", label));
  if (g.node(a).type.dtype != DType::I32) throw KernelError(fmt::format("{}: expects int32 values", label));
  const double d = double(b);
  const auto i32 = [&](double v) { return g.full({{1}, DType::I32}, v, label); };
  const int estimate = g.cast(g.binary_scalar(ExprOp::Div, g.cast(a, DType::F32, label), d, false, label), DType::I32, label);
  const auto remainder_of = [&](int q) { return g.binary(ExprOp::Sub, a, g.binary_scalar(ExprOp::Mul, q, d, false, label), label); };
  // one step up when the remainder reached b (the estimate rounded down past the quotient)
  const int r0 = remainder_of(estimate);
  const int up = b > 0 ? g.binary_scalar(ExprOp::Ge, r0, d, false, label) : g.binary_scalar(ExprOp::Le, r0, d, false, label);
  const int q1 = g.where(up, g.binary_scalar(ExprOp::Add, estimate, 1, false, label), estimate, label);
  // one step down when the remainder has the wrong sign (truncation toward zero, or rounding up)
  const int r1 = remainder_of(q1);
  const int down = b > 0 ? g.binary_scalar(ExprOp::Lt, r1, 0, false, label) : g.binary_scalar(ExprOp::Gt, r1, 0, false, label);
  const int quotient = g.where(down, g.binary(ExprOp::Sub, q1, i32(1), label), q1, label);
  return {quotient, g.where(down, g.binary_scalar(ExprOp::Add, r1, d, false, label), r1, label)};
}

FloorDivision floor_divide_by(Graph& g, int a, int b, const std::string& label) {
  if (g.node(a).type.dtype != DType::I32 || g.node(b).type.dtype != DType::I32) {
    throw KernelError(fmt::format("{}: expects int32 values and divisors", label));
  }
  const int estimate = g.cast(g.binary(ExprOp::Div, g.cast(a, DType::F32, label), g.cast(b, DType::F32, label), label), DType::I32, label);
  const auto remainder_of = [&](int q) { return g.binary(ExprOp::Sub, a, g.binary(ExprOp::Mul, q, b, label), label); };
  const int positive = g.binary_scalar(ExprOp::Gt, b, 0, false, label);
  // one step up when the remainder reached b, one down when its sign is not b's (as above, with
  // the comparisons chosen per element by b's sign)
  const int r0 = remainder_of(estimate);
  const int up = g.where(positive, g.binary(ExprOp::Ge, r0, b, label), g.binary(ExprOp::Le, r0, b, label), label);
  const int q1 = g.where(up, g.binary_scalar(ExprOp::Add, estimate, 1, false, label), estimate, label);
  const int r1 = remainder_of(q1);
  const int down = g.where(positive, g.binary_scalar(ExprOp::Lt, r1, 0, false, label), g.binary_scalar(ExprOp::Gt, r1, 0, false, label), label);
  return {g.where(down, g.binary_scalar(ExprOp::Sub, q1, 1, false, label), q1, label),
          g.where(down, g.binary(ExprOp::Add, r1, b, label), r1, label)};
}

}  // namespace vtpu::kernels
