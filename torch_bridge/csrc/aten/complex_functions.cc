// Complex64's inverse trigonometric and hyperbolic functions, log1p, pow, logaddexp and products,
// composed of the complex ops complex.cc lowers (sqrt, log, exp, mul on the (re, im) planes) and
// real ones on the planes. The inverse functions are Kahan's ("Branch cuts for complex elementary
// functions", 1987), as C's casin and friends compute them: products of two principal square
// roots, with no cancellation near the branch points or for large |z| (the textbook
// -i log(iz + sqrt(1 - z^2)) loses every digit for large real z).
#include <ATen/ATen.h>

#include <cmath>
#include <limits>

#include "torch_bridge/csrc/aten/complex.h"

namespace vtpu::bridge::complex {
namespace {

at::Tensor re(const at::Tensor& z) { return part(z, 0); }
at::Tensor im(const at::Tensor& z) { return part(z, 1); }
at::Tensor scaled(const at::Tensor& x, double s) { return at::mul(x, s); }
at::Tensor times_i(const at::Tensor& z) { return join(at::neg(im(z)), re(z)); }      // iz
at::Tensor times_minus_i(const at::Tensor& z) { return join(im(z), at::neg(re(z))); }  // -iz

// asin z = atan2(x, Re(A B)) + i asinh(Im(conj(A) B)), A = sqrt(1 - z), B = sqrt(1 + z).
at::Tensor asin_of(const at::Tensor& z) {
  const at::Tensor a = at::sqrt(at::add(at::neg(z), 1)), b = at::sqrt(at::add(z, 1));
  const at::Tensor real = at::atan2(re(z), at::sub(at::mul(re(a), re(b)), at::mul(im(a), im(b))));
  return join(real, at::asinh(at::sub(at::mul(re(a), im(b)), at::mul(im(a), re(b)))));
}

// acos z = 2 atan2(Re A, Re B) + i asinh(Im(conj(B) A)), A and B as for asin.
at::Tensor acos_of(const at::Tensor& z) {
  const at::Tensor a = at::sqrt(at::add(at::neg(z), 1)), b = at::sqrt(at::add(z, 1));
  const at::Tensor real = scaled(at::atan2(re(a), re(b)), 2.0);
  return join(real, at::asinh(at::sub(at::mul(re(b), im(a)), at::mul(im(b), re(a)))));
}

// acosh z = asinh(Re(conj(A) B)) + 2i atan2(Im A, Re B), A = sqrt(z - 1), B = sqrt(z + 1).
at::Tensor acosh_of(const at::Tensor& z) {
  const at::Tensor a = at::sqrt(at::sub(z, 1)), b = at::sqrt(at::add(z, 1));
  const at::Tensor real = at::asinh(at::add(at::mul(re(a), re(b)), at::mul(im(a), im(b))));
  return join(real, scaled(at::atan2(im(a), re(b)), 2.0));
}

// atanh z = log1p(4x / ((1 - x)^2 + y^2)) / 4 + i atan2(2y, (1 - x)(1 + x) - y^2) / 2: accurate
// near 0, where log((1 + z) / (1 - z)) / 2 would cancel. The real part is odd in x and taken at
// |x|, so log1p's argument is never near -1 (x near -1 would lose every digit there).
at::Tensor atanh_of(const at::Tensor& z) {
  const at::Tensor x = re(z), y = im(z), ax = at::abs(x), one_minus = at::add(at::neg(ax), 1);
  const at::Tensor den = at::add(at::mul(one_minus, one_minus), at::mul(y, y));
  const at::Tensor real = at::copysign(scaled(at::log1p(at::div(scaled(ax, 4.0), den)), 0.25), x);
  const at::Tensor imag = scaled(at::atan2(scaled(y, 2.0), at::sub(at::mul(one_minus, at::add(ax, 1)), at::mul(y, y))), 0.5);
  return join(real, imag);
}

// log1p z as c10::complex computes it: (log1p(x (2 + x) + y^2) / 2, atan2(y, 1 + x)) inside
// |z| < 0.5, where log|1 + z| would round 1 + z away; log(hypot(1 + x, y)) outside.
at::Tensor log1p_of(const at::Tensor& z) {
  const at::Tensor x = re(z), y = im(z);
  const at::Tensor r = at::add(at::mul(x, at::add(x, 2)), at::mul(y, y));
  const at::Tensor near = at::where(at::eq(r, 0), x, scaled(at::log1p(r), 0.5));  // r == 0: underflow, x itself
  const at::Tensor far = at::log(at::hypot(at::add(x, 1), y));
  return join(at::where(at::lt(at::hypot(x, y), 0.5), near, far), at::atan2(y, at::add(x, 1)));
}

}  // namespace

std::optional<at::Tensor> inverse_function(std::string_view op, const at::Tensor& z) {
  if (op == "asin") return asin_of(z);
  if (op == "acos") return acos_of(z);
  if (op == "asinh") return times_minus_i(asin_of(times_i(z)));  // asinh z = -i asin(iz)
  if (op == "acosh") return acosh_of(z);
  if (op == "atanh") return atanh_of(z);
  if (op == "atan") return times_minus_i(atanh_of(times_i(z)));  // atan z = -i atanh(iz)
  if (op == "log1p") return log1p_of(z);
  return std::nullopt;
}

// base^exponent = exp(exponent log base), as the CPU's cpow computes it; at a zero base what that
// gives: 0 for an exponent with a positive real part, (inf, NaN) for a negative one, NaN else.
at::Tensor pow(const at::Tensor& base, const at::Tensor& exponent) {
  const at::Tensor b = base.is_complex() ? base : base.to(at::kComplexFloat);  // log of a negative real
  const at::Tensor result = at::exp(at::mul(exponent, at::log(b)));
  const at::Tensor zero = at::logical_and(at::eq(re(b), 0), at::eq(im(b), 0));
  const at::Tensor e = re(exponent), nan = at::full({}, std::numeric_limits<float>::quiet_NaN(), e.options());
  const at::Tensor inf_or_nan = at::where(at::lt(e, 0), at::full_like(e, INFINITY), nan);
  const at::Tensor at_zero_re = at::where(at::gt(e, 0), at::zeros_like(e), inf_or_nan);
  const at::Tensor at_zero_im = at::where(at::gt(e, 0), at::zeros_like(e), nan);
  return join(at::where(zero, at_zero_re, re(result)), at::where(zero, at_zero_im, im(result)));
}

// log(exp x + exp y) as torch's CPU kernel: max + log1p(exp(min - max)), min and max by real
// part (a tie takes y as min, which decides the imaginary part's branch); NaN anywhere gives NaN;
// two equal infinite real parts give min (-inf) or log(exp min + exp max) (+inf).
at::Tensor logaddexp(const at::Tensor& x, const at::Tensor& y) {
  const at::Tensor zx = x.is_complex() ? x : x.to(at::kComplexFloat), zy = y.is_complex() ? y : y.to(at::kComplexFloat);
  const at::Tensor x_min = at::lt(re(zx), re(zy));
  const at::Tensor lo = at::where(x_min, zx, zy), hi = at::where(x_min, zy, zx);
  at::Tensor out = at::add(log1p_of(at::exp(at::sub(lo, hi))), hi);
  const at::Tensor infinite = at::logical_and(at::isinf(re(lo)), at::eq(re(lo), re(hi)));
  const at::Tensor at_infinity = at::where(at::lt(re(lo), 0), lo, at::log(at::add(at::exp(lo), at::exp(hi))));
  out = at::where(infinite, at_infinity, out);
  const at::Tensor any_nan = at::logical_or(at::isnan(zx), at::isnan(zy));
  return at::where(any_nan, join(at::full({}, NAN, re(out).options()), at::full({}, NAN, re(out).options())), out);
}

// The product along `dim` as a tree of complex multiplications: the dim padded with ones to a
// power of two, then halved log2(n) times (each half times the other). The CPU multiplies in
// another order: the results agree to rounding.
at::Tensor product(const at::Tensor& z, int64_t dim, bool keepdim) {
  at::Tensor x = z.movedim(dim, -1);
  int64_t n = x.size(-1), width = 1;
  while (width < n) width *= 2;
  if (width != n) x = at::constant_pad_nd(x, {0, width - n}, 1.0);
  for (; width > 1; width /= 2) x = at::mul(x.narrow(-1, 0, width / 2), x.narrow(-1, width / 2, width / 2));
  x = n == 1 ? x.squeeze(-1).clone() : x.squeeze(-1);  // a new tensor, never a view of z
  return keepdim ? x.unsqueeze(dim) : x;
}

}  // namespace vtpu::bridge::complex
