// Elementwise math the vector unit has no instruction for, composed from the ones it has, as a TPU
// compiler expands them into VPU sequences: rounding (trunc, floor, ceil, round, frac), signs,
// exp/log variants (expm1, log1p, exp2, log2, log10), trigonometric and hyperbolic functions
// (tan, atan, asin, acos, atan2, sinh, cosh, asinh, acosh, atanh), erfc, lgamma and digamma,
// fmax/fmin, logaddexp, hypot. One table row per op; each row's lowering serves its functional, in-place and out= forms.
//
// Numerics: f32 throughout (bf16 inputs are widened, results rounded back, as every chip op).
// trunc is the f32 -> int32 -> f32 round trip (exact below 2^23; above that every f32 is already
// an integer and passes through); round is half-to-even through the 2^23 addition, which
// the vector unit's round-to-nearest-even makes exact; expm1 and log1p use Kahan's corrections
// (no cancellation near 0); atan is Cephes' atanf polynomial after range reduction (about 1 ulp).
#include <ATen/ATen.h>
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <numbers>

#include "torch_bridge/csrc/aten/complex.h"
#include "torch_bridge/csrc/aten/int64.h"
#include "torch_bridge/csrc/aten/variants.h"
#include "torch_bridge/csrc/record/op_support.h"

namespace vtpu::bridge {
namespace {

using kernels::DType;
using kernels::ExprOp;
using kernels::Graph;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kPi = std::numbers::pi;

// Graph building with the names a formula reads with, every node labelled with the op.
struct Vpu {
  Graph& g;
  const char* op;
  int un(ExprOp e, int a) const { return g.unary(e, a, op); }
  int bin(ExprOp e, int a, int b) const { return g.binary(e, a, b, op); }
  int sc(ExprOp e, int a, double s) const { return g.binary_scalar(e, a, s, false, op); }
  int sc_first(ExprOp e, double s, int a) const { return g.binary_scalar(e, a, s, true, op); }
  int add(int a, int b) const { return bin(ExprOp::Add, a, b); }
  int sub(int a, int b) const { return bin(ExprOp::Sub, a, b); }
  int mul(int a, int b) const { return bin(ExprOp::Mul, a, b); }
  int div(int a, int b) const { return bin(ExprOp::Div, a, b); }
  int select(int c, int a, int b) const { return g.where(c, a, b, op); }
  int constant(int like, double v) const { return g.full({g.node(like).type.shape, DType::F32}, v, op); }
  int as_f32(int mask) const { return g.cast(mask, DType::F32, op); }
};

int trunc_of(const Vpu& m, int x) {
  const int t = m.g.cast(m.g.cast(x, DType::I32, m.op), DType::F32, m.op);
  return m.select(m.sc(ExprOp::Lt, m.un(ExprOp::Abs, x), 8388608.0), t, x);  // |x| >= 2^23 (or NaN): x
}
int floor_of(const Vpu& m, int x) {
  const int t = trunc_of(m, x);
  return m.sub(t, m.as_f32(m.bin(ExprOp::Gt, t, x)));
}
int ceil_of(const Vpu& m, int x) {
  const int t = trunc_of(m, x);
  return m.add(t, m.as_f32(m.bin(ExprOp::Lt, t, x)));
}
int round_of(const Vpu& m, int x) {
  const int a = m.un(ExprOp::Abs, x);
  const int r = m.sc(ExprOp::Sub, m.sc(ExprOp::Add, a, 8388608.0), 8388608.0);  // a + 2^23 rounds (RNE) to an integer
  const int signed_r = m.select(m.sc(ExprOp::Lt, x, 0), m.un(ExprOp::Neg, r), r);
  return m.select(m.sc(ExprOp::Lt, a, 8388608.0), signed_r, x);  // 2^23 and above (or NaN): already integers
}
int frac_of(const Vpu& m, int x) { return m.sub(x, trunc_of(m, x)); }
int sign_of(const Vpu& m, int x) {
  const int s = m.sub(m.as_f32(m.sc(ExprOp::Gt, x, 0)), m.as_f32(m.sc(ExprOp::Lt, x, 0)));
  return s;  // NaN compares false both ways: 0, as torch's sign
}

// expm1(x) = (u - 1) * x / log(u), u = exp(x) (Kahan): exact where u rounds to 1 or to 0.
int expm1_of(const Vpu& m, int x) {
  const int u = m.un(ExprOp::Exp, x);
  const int um1 = m.sc(ExprOp::Sub, u, 1);
  const int corrected = m.div(m.mul(um1, x), m.un(ExprOp::Log, u));
  const int r = m.select(m.sc(ExprOp::Eq, u, 1), x, m.select(m.sc(ExprOp::Eq, um1, -1), um1, corrected));
  return m.select(m.sc(ExprOp::Eq, u, kInf), u, r);
}
// log1p(x) = log(u) * x / (u - 1), u = 1 + x (Goldberg): exact where u rounds to 1.
int log1p_of(const Vpu& m, int x) {
  const int u = m.sc(ExprOp::Add, x, 1);
  const int corrected = m.div(m.mul(m.un(ExprOp::Log, u), x), m.sc(ExprOp::Sub, u, 1));
  const int r = m.select(m.sc(ExprOp::Eq, u, 1), x, corrected);
  return m.select(m.sc(ExprOp::Eq, x, kInf), x, m.select(m.sc(ExprOp::Eq, u, 0), m.un(ExprOp::Log, u), r));
}
int exp2_of(const Vpu& m, int x) { return m.sc_first(ExprOp::Pow, 2.0, x); }
int log2_of(const Vpu& m, int x) { return m.sc(ExprOp::Mul, m.un(ExprOp::Log, x), 1 / std::numbers::ln2); }
int log10_of(const Vpu& m, int x) { return m.sc(ExprOp::Mul, m.un(ExprOp::Log, x), 1 / std::numbers::ln10); }

int tan_of(const Vpu& m, int x) { return m.div(m.un(ExprOp::Sin, x), m.un(ExprOp::Cos, x)); }
// atan: |x| > 1 through pi/2 - atan(1/|x|), then > tan(pi/8) through pi/4 + atan((x-1)/(x+1)),
// then Cephes' atanf polynomial on [0, tan(pi/8)]; the sign restored last.
int atan_of(const Vpu& m, int x) {
  const int a = m.un(ExprOp::Abs, x);
  const int big = m.sc(ExprOp::Gt, a, 1);
  const int r1 = m.select(big, m.un(ExprOp::Reciprocal, a), a);
  const int mid = m.sc(ExprOp::Gt, r1, 0.41421356237309503);
  const int r2 = m.select(mid, m.div(m.sc(ExprOp::Sub, r1, 1), m.sc(ExprOp::Add, r1, 1)), r1);
  const int z = m.mul(r2, r2);
  int p = m.sc(ExprOp::Mul, z, 8.05374449538e-2);
  p = m.mul(m.sc(ExprOp::Add, p, -1.38776856032e-1), z);
  p = m.mul(m.sc(ExprOp::Add, p, 1.99777106478e-1), z);
  p = m.mul(m.sc(ExprOp::Add, p, -3.33329491539e-1), z);
  int y = m.add(m.mul(p, r2), r2);
  y = m.select(mid, m.sc(ExprOp::Add, y, kPi / 4), y);
  y = m.select(big, m.sc_first(ExprOp::Sub, kPi / 2, y), y);
  return m.select(m.sc(ExprOp::Lt, x, 0), m.un(ExprOp::Neg, y), y);
}
// atan2(y, x): atan(y / x) moved to the quadrant of (x, y); atan2(0, 0) = 0 as torch's, and two
// infinities as the unit vector of their signs.
int atan2_of(const Vpu& m, int y_in, int x_in) {
  const auto infinite = [&](int v) { return m.sc(ExprOp::Eq, m.un(ExprOp::Abs, v), kInf); };
  const int both_infinite = m.bin(ExprOp::And, infinite(x_in), infinite(y_in));
  const auto unit = [&](int v) { return m.select(m.sc(ExprOp::Lt, v, 0), m.constant(v, -1), m.constant(v, 1)); };
  const int y = m.select(both_infinite, unit(y_in), y_in), x = m.select(both_infinite, unit(x_in), x_in);
  const int t = atan_of(m, m.div(y, x));
  const int shift = m.select(m.sc(ExprOp::Lt, y, 0), m.constant(t, -kPi), m.constant(t, kPi));
  const int r = m.select(m.sc(ExprOp::Lt, x, 0), m.add(t, shift), t);
  const int both_zero = m.bin(ExprOp::And, m.sc(ExprOp::Eq, x, 0), m.sc(ExprOp::Eq, y, 0));
  return m.select(both_zero, m.select(m.sc(ExprOp::Lt, x, 0), shift, m.constant(t, 0)), r);
}
int sqrt_one_minus_square(const Vpu& m, int x) { return m.un(ExprOp::Sqrt, m.sc_first(ExprOp::Sub, 1, m.mul(x, x))); }
int asin_of(const Vpu& m, int x) { return atan2_of(m, x, sqrt_one_minus_square(m, x)); }
int acos_of(const Vpu& m, int x) { return atan2_of(m, sqrt_one_minus_square(m, x), x); }

int sinh_of(const Vpu& m, int x) {
  return m.sc(ExprOp::Mul, m.sub(expm1_of(m, x), expm1_of(m, m.un(ExprOp::Neg, x))), 0.5);
}
int cosh_of(const Vpu& m, int x) {
  return m.sc(ExprOp::Mul, m.add(m.un(ExprOp::Exp, x), m.un(ExprOp::Exp, m.un(ExprOp::Neg, x))), 0.5);
}
// asinh(x) = sign(x) log1p(|x| + x^2 / (1 + sqrt(1 + x^2))): no cancellation near 0; past 2^28,
// where x^2 would overflow, log(|x|) + ln 2.
int asinh_of(const Vpu& m, int x) {
  const int a = m.un(ExprOp::Abs, x);
  const int s = m.mul(a, a);
  const int near = log1p_of(m, m.add(a, m.div(s, m.sc(ExprOp::Add, m.un(ExprOp::Sqrt, m.sc(ExprOp::Add, s, 1)), 1))));
  const int r = m.select(m.sc(ExprOp::Gt, a, 268435456.0), m.sc(ExprOp::Add, m.un(ExprOp::Log, a), std::numbers::ln2), near);
  return m.select(m.sc(ExprOp::Lt, x, 0), m.un(ExprOp::Neg, r), r);
}
// acosh(x) = log1p(t + sqrt(2t + t^2)), t = x - 1 (exact near 1); past 2^28 log(x) + ln 2.
int acosh_of(const Vpu& m, int x) {
  const int t = m.sc(ExprOp::Sub, x, 1);
  const int near = log1p_of(m, m.add(t, m.un(ExprOp::Sqrt, m.add(m.sc(ExprOp::Mul, t, 2), m.mul(t, t)))));
  return m.select(m.sc(ExprOp::Gt, x, 268435456.0), m.sc(ExprOp::Add, m.un(ExprOp::Log, x), std::numbers::ln2), near);
}
int atanh_of(const Vpu& m, int x) {
  return m.sc(ExprOp::Mul, log1p_of(m, m.div(m.sc(ExprOp::Mul, x, 2), m.sc_first(ExprOp::Sub, 1, x))), 0.5);
}
// erfc: Numerical Recipes' erfcc (a Chebyshev fit of exp(z^2) erfc(z), fractional error below
// 1.2e-7), so the tail keeps its relative precision where 1 - erf(x) would be 0.
int erfc_of(const Vpu& m, int x) {
  const int z = m.un(ExprOp::Abs, x);
  const int t = m.un(ExprOp::Reciprocal, m.sc(ExprOp::Add, m.sc(ExprOp::Mul, z, 0.5), 1));
  constexpr double kFit[] = {0.17087277, -0.82215223, 1.48851587, -1.13520398, 0.27886807,
                             -0.18628806, 0.09678418, 0.37409196, 1.00002368, -1.26551223};
  int p = m.constant(t, kFit[0]);
  for (size_t i = 1; i < std::size(kFit); ++i) p = m.sc(ExprOp::Add, m.mul(p, t), kFit[i]);
  const int tail = m.mul(t, m.un(ExprOp::Exp, m.sub(p, m.mul(z, z))));
  return m.select(m.sc(ExprOp::Lt, x, 0), m.sc_first(ExprOp::Sub, 2, tail), tail);
}
int deg2rad_of(const Vpu& m, int x) { return m.sc(ExprOp::Mul, x, kPi / 180); }
int rad2deg_of(const Vpu& m, int x) { return m.sc(ExprOp::Mul, x, 180 / kPi); }

// lgamma: Lanczos' approximation (g = 7, 9 terms) for x >= 0.5, the reflection
// log(pi / |sin(pi x)|) - lgamma(1 - x) below; poles (0 and the negative integers) and
// infinities give +inf, as torch's.
int lgamma_positive(const Vpu& m, int x) {  // x >= 0.5
  constexpr double kG = 7, kC[] = {0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313,
                                   -176.61502916214059, 12.507343278686905, -0.13857109526572012,
                                   9.9843695780195716e-6, 1.5056327351493116e-7};
  const int z = m.sc(ExprOp::Sub, x, 1);
  int sum = m.constant(x, kC[0]);
  for (int i = 1; i < 9; ++i) sum = m.add(sum, m.div(m.constant(x, kC[i]), m.sc(ExprOp::Add, z, i)));
  const int t = m.sc(ExprOp::Add, z, kG + 0.5);
  // 0.5 log(2 pi) + (z + 0.5) log t - t + log(sum)
  const int r = m.add(m.sub(m.mul(m.sc(ExprOp::Add, z, 0.5), m.un(ExprOp::Log, t)), t), m.un(ExprOp::Log, sum));
  return m.sc(ExprOp::Add, r, 0.5 * std::log(2 * kPi));
}
int lgamma_of(const Vpu& m, int x) {
  const int small = m.sc(ExprOp::Lt, x, 0.5);
  // |sin(pi x)| = |sin(pi r)|, r = x - round(x) exactly: no rounding of pi x near the poles
  const int r_frac = m.sub(x, round_of(m, x));
  const int reflected = m.sub(m.un(ExprOp::Log, m.div(m.constant(x, kPi), m.un(ExprOp::Abs, m.un(ExprOp::Sin, m.sc(ExprOp::Mul, r_frac, kPi))))),
                              lgamma_positive(m, m.sc_first(ExprOp::Sub, 1, x)));
  const int r = m.select(small, reflected, lgamma_positive(m, m.select(small, m.constant(x, 1), x)));
  const int pole = m.bin(ExprOp::And, m.sc(ExprOp::Le, x, 0), m.bin(ExprOp::Eq, floor_of(m, x), x));
  return m.select(m.bin(ExprOp::Or, pole, m.sc(ExprOp::Eq, m.un(ExprOp::Abs, x), kInf)), m.constant(x, kInf), r);
}
// digamma: six steps of the recurrence psi(x) = psi(x + 1) - 1/x, then the asymptotic series at
// x + 6; the reflection psi(1 - x) - pi / tan(pi x) below 0.5. -inf at 0, NaN at the negative
// integers (torch: +inf at -0).
int digamma_positive(const Vpu& m, int x) {  // x >= 0.5
  int shift = m.constant(x, 0);
  for (int k = 0; k < 6; ++k) shift = m.add(shift, m.un(ExprOp::Reciprocal, m.sc(ExprOp::Add, x, k)));
  const int y = m.sc(ExprOp::Add, x, 6);
  const int inv2 = m.un(ExprOp::Reciprocal, m.mul(y, y));
  // log y - 1/(2y) - inv2 (1/12 - inv2 (1/120 - inv2 (1/252 - inv2 / 240)))
  int series = m.sc_first(ExprOp::Sub, 1.0 / 252, m.sc(ExprOp::Mul, inv2, 1.0 / 240));
  series = m.sc_first(ExprOp::Sub, 1.0 / 120, m.mul(inv2, series));
  series = m.sc_first(ExprOp::Sub, 1.0 / 12, m.mul(inv2, series));
  const int r = m.sub(m.sub(m.un(ExprOp::Log, y), m.un(ExprOp::Reciprocal, m.sc(ExprOp::Mul, y, 2))), m.mul(inv2, series));
  return m.sub(r, shift);
}
int digamma_of(const Vpu& m, int x) {
  const int small = m.sc(ExprOp::Lt, x, 0.5);
  const int r_frac = m.sub(x, round_of(m, x));  // tan has period pi: tan(pi x) = tan(pi r), exactly reduced
  const int reflected = m.sub(digamma_positive(m, m.sc_first(ExprOp::Sub, 1, x)),
                              m.div(m.constant(x, kPi), tan_of(m, m.sc(ExprOp::Mul, r_frac, kPi))));
  const int r = m.select(small, reflected, digamma_positive(m, m.select(small, m.constant(x, 1), x)));
  const int negative_integer = m.bin(ExprOp::And, m.sc(ExprOp::Lt, x, 0), m.bin(ExprOp::Eq, floor_of(m, x), x));
  const int at_zero = m.select(m.sc(ExprOp::Lt, m.un(ExprOp::Reciprocal, x), 0), m.constant(x, kInf), m.constant(x, -kInf));
  const int nan = m.constant(x, std::numeric_limits<double>::quiet_NaN());
  return m.select(m.sc(ExprOp::Eq, x, 0), at_zero, m.select(negative_integer, nan, r));
}

int is_nan(const Vpu& m, int x) { return m.bin(ExprOp::Ne, x, x); }
// fmax / fmin: the other operand where one is NaN.
int fmax_of(const Vpu& m, int a, int b) {
  return m.select(is_nan(m, a), b, m.select(is_nan(m, b), a, m.bin(ExprOp::Max, a, b)));
}
int fmin_of(const Vpu& m, int a, int b) {
  return m.select(is_nan(m, a), b, m.select(is_nan(m, b), a, m.bin(ExprOp::Min, a, b)));
}
// logaddexp(a, b) = max + log1p(exp(-|a - b|)); equal infinities give that infinity.
int logaddexp_of(const Vpu& m, int a, int b) {
  const int hi = m.bin(ExprOp::Max, a, b);
  const int r = m.add(hi, log1p_of(m, m.un(ExprOp::Exp, m.un(ExprOp::Neg, m.un(ExprOp::Abs, m.sub(a, b))))));
  return m.select(m.bin(ExprOp::Eq, a, b), m.add(a, m.constant(a, std::numbers::ln2)), r);
}
// hypot as C's: scaled by the larger magnitude, so the squares neither overflow (|x| > 1.8e19)
// nor underflow; an infinite operand gives +inf even beside NaN (C99 F.9.4.3), as on the CPU.
int hypot_of(const Vpu& m, int a, int b) {
  const int x = m.un(ExprOp::Abs, a), y = m.un(ExprOp::Abs, b);
  const int hi = m.bin(ExprOp::Max, x, y), lo = m.bin(ExprOp::Min, x, y);
  const int r = m.div(lo, hi);
  const int scaled = m.mul(hi, m.un(ExprOp::Sqrt, m.sc(ExprOp::Add, m.mul(r, r), 1.0)));
  const int finite = m.select(m.sc(ExprOp::Eq, hi, 0.0), m.constant(a, 0.0), scaled);  // (0 / 0)
  const int infinite = m.bin(ExprOp::Or, m.sc(ExprOp::Eq, x, kInf), m.sc(ExprOp::Eq, y, kInf));
  return m.select(infinite, m.constant(a, kInf), finite);
}

// Rows: C++ name, aten functional schema, in-place schema, out= schema, the formula, torch's CPU
// function; whether integer inputs keep their dtype (rounding and sign) or become float.
#define VTPU_COMPOSED_UNARY(X)                                                        \
  X(trunc, "trunc", "trunc_", "trunc.out", trunc_of, at::trunc, true)                 \
  X(floor, "floor", "floor_", "floor.out", floor_of, at::floor, true)                 \
  X(ceil, "ceil", "ceil_", "ceil.out", ceil_of, at::ceil, true)                       \
  X(round, "round", "round_", "round.out", round_of, at::round, true)                 \
  X(frac, "frac", "frac_", "frac.out", frac_of, at::frac, false)                      \
  X(sign, "sign", "sign_", "sign.out", sign_of, at::sign, true)                       \
  X(expm1, "expm1", "expm1_", "expm1.out", expm1_of, at::expm1, false)                \
  X(log1p, "log1p", "log1p_", "log1p.out", log1p_of, at::log1p, false)                \
  X(exp2, "exp2", "exp2_", "exp2.out", exp2_of, at::exp2, false)                      \
  X(log2, "log2", "log2_", "log2.out", log2_of, at::log2, false)                      \
  X(log10, "log10", "log10_", "log10.out", log10_of, at::log10, false)                \
  X(tan, "tan", "tan_", "tan.out", tan_of, at::tan, false)                            \
  X(atan, "atan", "atan_", "atan.out", atan_of, at::atan, false)                      \
  X(asin, "asin", "asin_", "asin.out", asin_of, at::asin, false)                      \
  X(acos, "acos", "acos_", "acos.out", acos_of, at::acos, false)                      \
  X(sinh, "sinh", "sinh_", "sinh.out", sinh_of, at::sinh, false)                      \
  X(cosh, "cosh", "cosh_", "cosh.out", cosh_of, at::cosh, false)                      \
  X(asinh, "asinh", "asinh_", "asinh.out", asinh_of, at::asinh, false)                \
  X(acosh, "acosh", "acosh_", "acosh.out", acosh_of, at::acosh, false)                \
  X(atanh, "atanh", "atanh_", "atanh.out", atanh_of, at::atanh, false)                \
  X(erfc, "erfc", "erfc_", "erfc.out", erfc_of, at::erfc, false)                      \
  X(lgamma, "lgamma", "lgamma_", "lgamma.out", lgamma_of, at::lgamma, false)          \
  X(digamma, "digamma", "digamma_", "digamma.out", digamma_of, at::digamma, false)    \
  X(deg2rad, "deg2rad", "deg2rad_", "deg2rad.out", deg2rad_of, at::deg2rad, false)    \
  X(rad2deg, "rad2deg", "rad2deg_", "rad2deg.out", rad2deg_of, at::rad2deg, false)

#define VTPU_COMPOSED_BINARY(X)                                                           \
  X(atan2, "atan2", "atan2_", "atan2.out", atan2_of, at::atan2)                           \
  X(fmax, "fmax", "", "fmax.out", fmax_of, at::fmax)                                      \
  X(fmin, "fmin", "", "fmin.out", fmin_of, at::fmin)                                      \
  X(logaddexp, "logaddexp", "", "logaddexp.out", logaddexp_of, at::logaddexp)             \
  X(hypot, "hypot", "hypot_", "hypot.out", hypot_of, at::hypot)

at::Tensor composed_unary(const char* op, int (*formula)(const Vpu&, int), bool keeps_integers, const at::Tensor& self,
                          const CpuFn& cpu) {
  if (self.scalar_type() == at::kComplexFloat) {
    if (auto z = complex::elementary(op, self)) return *z;
  }
  const bool integral = at::isIntegralType(self.scalar_type(), /*includeBool=*/true);
  if (integral && keeps_integers && op != std::string_view("sign")) return self.clone();  // already integers
  if (op == std::string_view("sign") && self.scalar_type() == at::kLong && self.device().is_privateuseone()) {
    return int64_exact_unary(op, Int64Unary::Sign, self, cpu);  // f32 would do, but not for int64's words
  }
  const auto dtype = integral && !keeps_integers ? at::kFloat : self.scalar_type();
  if (self.scalar_type() == at::kLong && dtype == at::kFloat) {  // int64's word pairs: promoted first, as torch promotes them
    return composed_unary(op, formula, keeps_integers, self.to(at::kFloat), cpu);
  }
  return record_elementwise(op, {self}, dtype, [&](Graph& g, const std::vector<int>& v) {
    const int x = g.node(v[0]).type.dtype == DType::F32 ? v[0] : g.cast(v[0], DType::F32, op);
    return formula(Vpu{g, op}, x);
  }, cpu);
}

at::Tensor composed_binary(const char* op, int (*formula)(const Vpu&, int, int), const at::Tensor& self,
                           const at::Tensor& other, const CpuFn& cpu) {
  auto dtype = at::result_type(self, other);
  if (dtype == at::kComplexFloat && op == std::string_view("logaddexp")) return complex::logaddexp(self, other);
  if (at::isIntegralType(dtype, /*includeBool=*/true)) {
    // integers hold no NaN: fmax and fmin are maximum and minimum, in the integers' dtype
    if (op == std::string_view("fmax")) return at::maximum(self, other);
    if (op == std::string_view("fmin")) return at::minimum(self, other);
    if (self.scalar_type() == at::kLong || other.scalar_type() == at::kLong) {  // int64's words: promoted first, as torch promotes
      const auto f32 = [](const at::Tensor& t) { return t.scalar_type() == at::kLong ? t.to(at::kFloat) : t; };
      return composed_binary(op, formula, f32(self), f32(other), cpu);
    }
    dtype = at::kFloat;
  }
  const auto [a, b] = with_scalar_uploaded(self, other, dtype);
  return record_elementwise(op, {a, b}, dtype, [&](Graph& g, const std::vector<int>& v) {
    const auto f32 = [&](int x) { return g.node(x).type.dtype == DType::F32 ? x : g.cast(x, DType::F32, op); };
    return formula(Vpu{g, op}, f32(v[0]), f32(v[1]));
  }, cpu);
}

#define VTPU_DEFINE_COMPOSED_UNARY(name, schema, inplace, out, formula, aten_call, keeps_integers)                  \
  at::Tensor tpu_##name(const at::Tensor& self) {                                                                \
    return composed_unary(#name, formula, keeps_integers, self,                                                  \
                          [](const std::vector<at::Tensor>& c) { return aten_call(c[0]); });                     \
  }
VTPU_COMPOSED_UNARY(VTPU_DEFINE_COMPOSED_UNARY)
#undef VTPU_DEFINE_COMPOSED_UNARY

#define VTPU_DEFINE_COMPOSED_BINARY(name, schema, inplace, out, formula, aten_call)                                  \
  at::Tensor tpu_##name(const at::Tensor& self, const at::Tensor& other) {                                        \
    return composed_binary(#name, formula, self, other,                                                           \
                           [](const std::vector<at::Tensor>& c) { return aten_call(c[0], c[1]); });               \
  }
VTPU_COMPOSED_BINARY(VTPU_DEFINE_COMPOSED_BINARY)
#undef VTPU_DEFINE_COMPOSED_BINARY

// signbit: negative, or a negative zero (whose reciprocal is -inf). A NaN's sign bit is not
// read: false, where torch reports the bit of -nan.
at::Tensor tpu_signbit(const at::Tensor& self) {
  if (at::isIntegralType(self.scalar_type(), /*includeBool=*/true)) return at::lt(self, 0);  // int64 on its words
  return record_elementwise("signbit", {self}, at::kBool, [&](Graph& g, const std::vector<int>& v) {
    const Vpu m{g, "signbit"};
    const int x = g.node(v[0]).type.dtype == DType::F32 ? v[0] : g.cast(v[0], DType::F32, "signbit");
    const int negative_zero = m.bin(ExprOp::And, m.sc(ExprOp::Eq, x, 0), m.sc(ExprOp::Lt, m.un(ExprOp::Reciprocal, x), 0));
    return m.bin(ExprOp::Or, m.sc(ExprOp::Lt, x, 0), negative_zero);
  }, [](const std::vector<at::Tensor>& c) { return at::signbit(c[0]); });
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("signbit", tpu_signbit);
  m.impl("signbit.out", Variants<tpu_signbit>::out);
#define VTPU_REGISTER(name, schema, inplace_schema, out_schema, ...)                \
  m.impl(schema, tpu_##name);                                                       \
  if (*inplace_schema) m.impl(inplace_schema, Variants<tpu_##name>::inplace);       \
  m.impl(out_schema, Variants<tpu_##name>::out);
  VTPU_COMPOSED_UNARY(VTPU_REGISTER)
  VTPU_COMPOSED_BINARY(VTPU_REGISTER)
#undef VTPU_REGISTER
}

}  // namespace vtpu::bridge
