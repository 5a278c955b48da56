// See integer_power.h.
#include "kernels/compose/integer_power.h"

#include <fmt/format.h>

#include "kernels/codegen/kernel_error.h"

namespace vtpu::kernels {
namespace {

void check(Graph& g, int a, const std::string& label) {
  if (g.node(a).type.dtype != DType::I32) throw KernelError(fmt::format("{}: int32 bases, not {}", label, to_string(g.node(a).type)));
}

int constant(Graph& g, double v, const std::string& label) { return g.full({{1}, DType::I32}, v, label); }
int ones_like(Graph& g, int a, const std::string& label) {
  return g.binary_scalar(ExprOp::Add, g.binary_scalar(ExprOp::Mul, a, 0, false, label), 1, false, label);
}

}  // namespace

int integer_power(Graph& g, int a, int b, int exponent_bits, const std::string& label) {
  check(g, a, label);
  if (g.node(b).type.dtype != DType::I32 || exponent_bits < 1 || exponent_bits > 31) {
    throw KernelError(fmt::format("{}: int32 exponents of 1 to 31 bits, not {} of {}", label, to_string(g.node(b).type), exponent_bits));
  }
  // square and multiply, one exponent bit at a time from the lowest. The bit (0 or 1, an integer:
  // a mask per bit would hold one mask register each where the exponent's shape is not the
  // result's) picks the factor base or 1 as 1 + bit (base - 1), exact modulo 2^32.
  int result = ones_like(g, a, label);
  int base = a, rest = b;
  for (int bit = 0; bit < exponent_bits; ++bit) {
    const int set = g.binary_scalar(ExprOp::BitAnd, rest, 1, false, label);
    const int base_less_one = g.binary_scalar(ExprOp::Sub, base, 1, false, label);
    const int factor = g.binary_scalar(ExprOp::Add, g.binary(ExprOp::Mul, set, base_less_one, label), 1, false, label);
    result = g.binary(ExprOp::Mul, result, factor, label);
    if (bit + 1 < exponent_bits) {
      base = g.binary(ExprOp::Mul, base, base, label);
      rest = g.binary_scalar(ExprOp::Shr, rest, 1, false, label);
    }
  }
  // negative exponents: 1 / a^|b| truncated toward zero
  const int odd = g.binary_scalar(ExprOp::Ne, g.binary_scalar(ExprOp::BitAnd, b, 1, false, label), 0, false, label);
  const int minus_one = g.where(odd, constant(g, -1, label), constant(g, 1, label), label);
  const int reciprocal = g.where(g.binary_scalar(ExprOp::Eq, a, 1, false, label), constant(g, 1, label),
                                 g.where(g.binary_scalar(ExprOp::Eq, a, -1, false, label), minus_one, constant(g, 0, label), label), label);
  return g.where(g.binary_scalar(ExprOp::Lt, b, 0, false, label), reciprocal, result, label);
}

int integer_power_by(Graph& g, int a, int64_t b, const std::string& label) {
  check(g, a, label);
  if (b < 0) throw KernelError(fmt::format("{}: a negative constant exponent {}", label, b));
  int result = -1, base = a;
  for (int64_t rest = b; rest > 0; rest >>= 1) {
    if (rest & 1) result = result < 0 ? base : g.binary(ExprOp::Mul, result, base, label);
    if (rest > 1) base = g.binary(ExprOp::Mul, base, base, label);
  }
  return result < 0 ? ones_like(g, a, label) : result;  // a^0 = 1, a^1 is a itself
}

}  // namespace vtpu::kernels
