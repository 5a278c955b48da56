// Complex64 on the chip: each complex value an (re, im) f32 pair, each op a few f32 ops over the
// two planes of view_as_real (complex.h). The formulas are the ones torch's CPU kernels use, so
// results agree to f32 rounding: Smith's scaled division (c10::complex's, numpy's), exp as
// e^re (cos im, sin im), abs as hypot, log as (log |z|, atan2(im, re)), sin and cos through
// the real parts' sin, cos, sinh and cosh.
#include "torch_bridge/csrc/aten/complex.h"

#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <torch/library.h>

#include <cmath>

namespace vtpu::bridge::complex {

// The complex64 tensor of two f32 planes (broadcast to one shape; a missing imaginary plane is 0).
at::Tensor join(const at::Tensor& re, const at::Tensor& im) {
  TORCH_INTERNAL_ASSERT(re.defined() && !re.is_cpu(), "vtpu: a complex result without a device plane");
  const at::Tensor f = re.to(at::kFloat);
  const at::Tensor i = im.defined() ? im.to(at::kFloat) : at::zeros_like(f);
  const auto shape = at::infer_size(f.sizes(), i.sizes());
  return at::view_as_complex(at::stack({f.expand(shape), i.expand(shape)}, -1));
}

namespace {

using kernels::ExprOp;

// The planes of an operand. An undefined `im` is zero (a real operand), so the terms it would
// multiply are skipped rather than computed as zeros.
struct Planes {
  at::Tensor re, im;
};

at::Tensor wrapped(double v) { return wrapped_scalar(v); }

// A device tensor without math bits holding the physical elements of `t`'s storage.
at::Tensor physical(const at::Tensor& t) {
  at::Tensor p = t;
  if (p.is_conj()) p = p.conj();      // conj of a conjugate view clears the bit: the stored values
  if (p.is_neg()) p = at::_neg_view(p);
  return p;
}

Planes planes(const at::Tensor& t) {
  if (is_cpu_scalar(t)) {  // a Python number (or a 0-dim CPU tensor): its two parts as wrapped scalars
    const c10::complex<double> v = t.item().toComplexDouble();
    return {wrapped(v.real()), v.imag() == 0 ? at::Tensor() : wrapped(v.imag())};
  }
  const at::Tensor p = physical(t);
  if (!p.is_complex()) return {t.is_neg() ? at::neg(p) : p, {}};
  const at::Tensor r = at::view_as_real(p);
  at::Tensor re = r.select(-1, 0), im = r.select(-1, 1);
  if (t.is_neg()) re = at::neg(re), im = at::neg(im);
  if (t.is_conj()) im = at::neg(im);
  return {re, im};
}

at::Tensor zero_or(const at::Tensor& x) { return x.defined() ? x : wrapped(0.0); }
// The imaginary plane as a tensor (zeros shaped like the real one for a real operand).
at::Tensor zero_or_plane(const Planes& p) { return p.im.defined() ? p.im : at::zeros_like(p.re); }
at::Tensor mul0(const at::Tensor& a, const at::Tensor& b) { return a.defined() && b.defined() ? at::mul(a, b) : at::Tensor(); }
at::Tensor add0(const at::Tensor& a, const at::Tensor& b) { return !a.defined() ? b : !b.defined() ? a : at::add(a, b); }
at::Tensor sub0(const at::Tensor& a, const at::Tensor& b) { return !b.defined() ? a : !a.defined() ? at::neg(b) : at::sub(a, b); }

// x / y by Smith's scaling (torch's CPU kernel): the ratio of the divisor's smaller part to its
// larger, so c^2 + d^2 never overflows; a zero divisor gives (a / |c|, b / |d|) as torch does.
Planes divide(const Planes& x, const Planes& y) {
  if (!y.im.defined()) return {at::div(x.re, y.re), x.im.defined() ? at::div(x.im, y.re) : at::Tensor()};
  if (is_cpu_scalar(y.re) && is_cpu_scalar(y.im)) {  // a number: the same scaling, its part on the host
    const double c = y.re.item<double>(), d = y.im.item<double>();
    const bool big = std::abs(c) >= std::abs(d);
    const double rat = big ? d / c : c / d, scale = 1.0 / (big ? c + d * rat : d + c * rat);
    const at::Tensor b = zero_or(x.im);
    const at::Tensor re = big ? at::add(x.re, at::mul(b, wrapped(rat))) : at::add(at::mul(x.re, wrapped(rat)), b);
    const at::Tensor im = big ? at::sub(b, at::mul(x.re, wrapped(rat))) : at::sub(at::mul(b, wrapped(rat)), x.re);
    return {at::mul(re, wrapped(scale)), at::mul(im, wrapped(scale))};
  }
  const at::Tensor &a = x.re, b = zero_or(x.im), &c = y.re, &d = y.im;
  const at::Tensor big = at::ge(at::abs(c), at::abs(d));
  const at::Tensor rat = at::where(big, at::div(d, c), at::div(c, d));
  const at::Tensor den = at::where(big, at::add(c, at::mul(d, rat)), at::add(d, at::mul(c, rat)));
  at::Tensor re = at::div(at::where(big, at::add(a, at::mul(b, rat)), at::add(at::mul(a, rat), b)), den);
  at::Tensor im = at::div(at::where(big, at::sub(b, at::mul(a, rat)), at::sub(at::mul(b, rat), a)), den);
  const at::Tensor zero = at::logical_and(at::eq(c, 0), at::eq(d, 0));
  re = at::where(zero, at::div(a, at::abs(c)), re);
  im = at::where(zero, at::div(b, at::abs(d)), im);
  return {re, im};
}

bool is_complex64_result(c10::ScalarType t) { return t == at::kComplexFloat; }

// The principal square root as C's csqrt gives it for finite values, without cancellation:
// t = sqrt((|z| + |a|) / 2), then (t, b / 2t) for a >= 0 and (|b| / 2t, t with b's sign) for a < 0;
// 0 at 0.
Planes principal_root(const Planes& z) {
  const at::Tensor b = zero_or_plane(z);
  const at::Tensor t = at::sqrt(at::mul(at::add(at::hypot(z.re, b), at::abs(z.re)), wrapped(0.5)));
  const at::Tensor half = at::where(at::eq(t, 0), wrapped(0.0), at::div(b, at::mul(t, wrapped(2.0))));
  const at::Tensor right = at::ge(z.re, 0);
  return {at::where(right, t, at::abs(half)), at::where(right, half, at::copysign(t, b))};
}

}  // namespace

bool involved(const at::Tensor& a, const at::Tensor& b) { return a.is_complex() || (b.defined() && b.is_complex()); }

at::Tensor as_pairs(const at::Tensor& z) { return at::view_as_real(resolved(z)); }
at::Tensor from_pairs(const at::Tensor& pairs) { return at::view_as_complex(pairs.contiguous()); }

at::Tensor per_plane(const at::Tensor& z, const std::function<at::Tensor(const at::Tensor&, int part)>& f) {
  const Planes p = planes(z);
  return join(f(p.re, 0), f(zero_or_plane(p), 1));
}

at::Tensor truth(const at::Tensor& z) { return at::ne(as_pairs(z), 0).any(-1); }

at::Tensor part(const at::Tensor& t, int which) {
  const Planes p = planes(t);
  return which == 0 ? p.re : zero_or_plane(p);
}

at::Tensor linear(const at::Tensor& z, const std::function<at::Tensor(const at::Tensor&)>& f) {
  const Planes p = planes(z);
  return join(f(p.re), p.im.defined() ? f(p.im) : at::Tensor());
}

at::Tensor bilinear(const at::Tensor& x, const at::Tensor& y,
                    const std::function<at::Tensor(const at::Tensor&, const at::Tensor&)>& f) {
  const Planes a = planes(x), b = planes(y);
  const auto term = [&](const at::Tensor& u, const at::Tensor& v) { return u.defined() && v.defined() ? f(u, v) : at::Tensor(); };
  return join(sub0(f(a.re, b.re), term(a.im, b.im)), add0(term(a.re, b.im), term(a.im, b.re)));
}

void fill(const at::Tensor& self, const c10::complex<double>& value) {
  if (self.scalar_type() != at::kComplexFloat) {  // complex128 (or 32): its value exactly, from the host
    self.copy_(at::full(self.sizes(), value, self.options().device(at::kCPU)));
    return;
  }
  const auto plane = [&](double v) { return at::full(self.sizes(), v, self.options().dtype(at::kFloat)); };
  self.copy_(join(plane(value.real()), plane(value.imag())));
}

at::Tensor unary(const char* op, ExprOp e, const at::Tensor& self, const CpuFn& cpu) {
  if (!is_complex64_result(self.scalar_type())) return run_on_cpu(op, {self}, cpu, c10::str(self.scalar_type(), " tensors"));
  const Planes z = planes(self);
  switch (e) {
    case ExprOp::Neg: return join(at::neg(z.re), at::neg(z.im));
    case ExprOp::Abs: return at::hypot(z.re, z.im);
    case ExprOp::Exp: {
      const at::Tensor m = at::exp(z.re);
      return join(at::mul(m, at::cos(z.im)), at::mul(m, at::sin(z.im)));
    }
    case ExprOp::Log: return join(at::log(at::hypot(z.re, z.im)), at::atan2(z.im, z.re));
    // sin(a + bi) = sin a cosh b + i cos a sinh b; cos(a + bi) = cos a cosh b - i sin a sinh b
    case ExprOp::Sin: return join(at::mul(at::sin(z.re), at::cosh(z.im)), at::mul(at::cos(z.re), at::sinh(z.im)));
    case ExprOp::Cos: return join(at::mul(at::cos(z.re), at::cosh(z.im)), at::neg(at::mul(at::sin(z.re), at::sinh(z.im))));
    case ExprOp::Reciprocal: {
      const Planes q = divide({wrapped(1.0), {}}, z);
      return join(q.re, q.im);
    }
    case ExprOp::Square: return join(at::sub(at::mul(z.re, z.re), at::mul(z.im, z.im)), at::mul(at::mul(z.re, z.im), wrapped(2.0)));
    case ExprOp::Sqrt: {
      const Planes r = principal_root(z);
      return join(r.re, r.im);
    }
    case ExprOp::Rsqrt: {
      const Planes q = divide({wrapped(1.0), {}}, principal_root(z));
      return join(q.re, q.im);
    }
    // tanh(a + bi) = (sinh 2a + i sin 2b) / (cosh 2a + cos 2b); past |a| = 9 that is (sign a, 0) to
    // f32 (the formula's terms would overflow to inf / inf)
    case ExprOp::Tanh: {
      const at::Tensor a2 = at::mul(z.re, wrapped(2.0)), b2 = at::mul(z.im, wrapped(2.0));
      const at::Tensor den = at::add(at::cosh(a2), at::cos(b2));
      const at::Tensor far = at::gt(at::abs(z.re), wrapped(9.0));
      return join(at::where(far, at::sign(z.re), at::div(at::sinh(a2), den)), at::where(far, wrapped(0.0), at::div(at::sin(b2), den)));
    }
    // sigmoid(z) = 1 / (1 + exp(-z)) and silu(z) = z / (1 + exp(-z)), as torch's CPU kernels compute them
    case ExprOp::Sigmoid:
    case ExprOp::Silu: {
      const at::Tensor m = at::exp(at::neg(z.re));
      const Planes one_plus = {at::add(at::mul(m, at::cos(z.im)), wrapped(1.0)), at::neg(at::mul(m, at::sin(z.im)))};
      const Planes q = divide(e == ExprOp::Silu ? z : Planes{wrapped(1.0), {}}, one_plus);
      return join(q.re, q.im);
    }
    default: return run_on_cpu(op, {self}, cpu, "complex64 inputs (no complex rule for this op on the chip)");
  }
}

std::optional<at::Tensor> elementary(std::string_view op, const at::Tensor& self) {
  const Planes z = planes(self);
  const at::Tensor &a = z.re, b = zero_or_plane(z);
  if (op == "sinh") return join(at::mul(at::sinh(a), at::cos(b)), at::mul(at::cosh(a), at::sin(b)));
  if (op == "cosh") return join(at::mul(at::cosh(a), at::cos(b)), at::mul(at::sinh(a), at::sin(b)));
  if (op == "tan") {  // (sin 2a + i sinh 2b) / (cos 2a + cosh 2b); past |b| = 9, (0, sign b) to f32
    const at::Tensor a2 = at::mul(a, wrapped(2.0)), b2 = at::mul(b, wrapped(2.0));
    const at::Tensor den = at::add(at::cos(a2), at::cosh(b2)), far = at::gt(at::abs(b), wrapped(9.0));
    return join(at::where(far, wrapped(0.0), at::div(at::sin(a2), den)), at::where(far, at::sign(b), at::div(at::sinh(b2), den)));
  }
  if (op == "expm1") {  // (expm1(a) cos b - 2 sin^2(b / 2), e^a sin b): no cancellation near 0
    const at::Tensor s = at::sin(at::mul(b, wrapped(0.5)));
    return join(at::sub(at::mul(at::expm1(a), at::cos(b)), at::mul(at::mul(s, s), wrapped(2.0))), at::mul(at::exp(a), at::sin(b)));
  }
  if (op == "exp2") return at::exp(at::mul(self, wrapped(std::log(2.0))));
  if (op == "log2" || op == "log10") return at::div(at::log(self), wrapped(std::log(op == "log2" ? 2.0 : 10.0)));
  return inverse_function(op, self);
}

at::Tensor binary(const char* op, ExprOp e, const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha,
                  const CpuFn& cpu) {
  const auto dtype = at::result_type(self, other);
  const bool comparison = e == ExprOp::Eq || e == ExprOp::Ne;
  const bool arithmetic = e == ExprOp::Add || e == ExprOp::Sub || e == ExprOp::Mul || e == ExprOp::Div;
  if (!is_complex64_result(dtype)) return run_on_cpu(op, {self, other}, cpu, c10::str(dtype, " tensors"));
  if (e == ExprOp::Pow && self.is_complex() && is_cpu_scalar(other) && !other.is_complex()) {
    // the real exponents torch's CPU kernel computes by products and roots (square is pow(z, 2))
    const double p = other.item<double>();
    if (p == 2) return at::mul(self, self);
    if (p == 3) return at::mul(at::mul(self, self), self);
    if (p == 0.5) return at::sqrt(self);
    if (p == -0.5) return at::rsqrt(self);
    if (p == -1) return at::reciprocal(self);
    if (p == -2) return at::reciprocal(at::mul(self, self));
  }
  if (e == ExprOp::Pow) return complex::pow(self, other);
  if (!comparison && !arithmetic) return run_on_cpu(op, {self, other}, cpu, "complex64 inputs (no complex rule for this op on the chip)");
  const Planes x = planes(self);
  Planes y = planes(other);
  if (alpha.isComplex() || alpha.toDouble() != 1.0) {  // add/sub scale the other operand by alpha
    const c10::complex<double> s = alpha.toComplexDouble();
    y = {sub0(mul0(y.re, wrapped(s.real())), mul0(y.im, s.imag() == 0 ? at::Tensor() : wrapped(s.imag()))),
         add0(mul0(y.re, s.imag() == 0 ? at::Tensor() : wrapped(s.imag())), mul0(y.im, wrapped(s.real())))};
  }
  switch (e) {
    case ExprOp::Add: return join(at::add(x.re, y.re), add0(x.im, y.im));
    case ExprOp::Sub: return join(at::sub(x.re, y.re), sub0(x.im, y.im));
    case ExprOp::Mul: return join(sub0(at::mul(x.re, y.re), mul0(x.im, y.im)), add0(mul0(x.re, y.im), mul0(x.im, y.re)));
    case ExprOp::Div: {
      const Planes q = divide(x, y);
      return join(q.re, q.im);
    }
    default: {
      const at::Tensor same = at::logical_and(at::eq(x.re, y.re), at::eq(zero_or(x.im), zero_or(y.im)));
      return e == ExprOp::Eq ? same : at::logical_not(same);
    }
  }
}

at::Tensor where(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other, const CpuFn& cpu) {
  const auto dtype = at::result_type(self, other);
  if (!is_complex64_result(dtype)) return run_on_cpu("where", {condition, self, other}, cpu, c10::str(dtype, " tensors"));
  const Planes x = planes(self), y = planes(other);
  return join(at::where(condition, x.re, y.re), at::where(condition, zero_or(x.im), zero_or(y.im)));
}

at::Tensor resolved(const at::Tensor& t) {
  if (!t.is_conj() && !t.is_neg()) return t;
  at::Tensor out = at::empty_like(t);  // never carries the math bits
  out.copy_(t);
  return out;
}

bool copy_values(const at::Tensor& dst, const at::Tensor& src) {
  const bool bits = src.is_conj() || src.is_neg() || dst.is_conj() || dst.is_neg();
  if (!bits && !src.is_complex() && !dst.is_complex()) return false;
  if (dst.is_conj() || dst.is_neg()) {  // write the stored values: conj / negate what src holds
    at::Tensor value = src.is_complex() || dst.is_complex() ? src.to(dst.scalar_type()) : src;
    if (dst.is_conj()) value = value.conj();
    if (dst.is_neg()) value = at::_neg_view(value);
    physical(dst).copy_(value);
    return true;
  }
  if (!dst.is_complex()) {  // complex -> real keeps the real part, as torch does (and warns)
    if (src.is_complex()) {
      TORCH_WARN_ONCE("Casting complex values to real discards the imaginary part");
    }
    const Planes p = planes(src);
    dst.copy_(p.re);
    return true;
  }
  const at::Tensor target = at::view_as_real(dst);
  if (src.is_complex() && !bits && src.scalar_type() == dst.scalar_type()) {
    target.copy_(at::view_as_real(src));  // the same pairs: one copy of the [.., 2] planes
    return true;
  }
  const Planes p = planes(src);
  const at::Tensor re = p.re.to(target.scalar_type());
  const at::Tensor im = p.im.defined() ? p.im.to(target.scalar_type()) : at::zeros_like(re);
  target.copy_(at::stack({re.expand(dst.sizes()), im.expand(dst.sizes())}, -1));
  return true;
}

namespace {

// torch's checks on complex's and polar's parts and their out= tensor, with its messages.
void check_parts(const at::Tensor& out, const at::Tensor& a, const at::Tensor& b) {
  const auto floating = [](const at::Tensor& t) { return t.scalar_type() == at::kFloat || t.scalar_type() == at::kDouble || t.scalar_type() == at::kHalf; };
  TORCH_CHECK(floating(a) && floating(b), "Expected both inputs to be Half, Float or Double tensors but got ", a.scalar_type(), " and ",
              b.scalar_type());
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "Expected object of scalar type ", a.scalar_type(), " but got scalar type ",
              b.scalar_type(), " for second argument");
  TORCH_CHECK(out.scalar_type() == c10::toComplexType(a.scalar_type()), "Expected object of scalar type ",
              c10::toComplexType(a.scalar_type()), " but got scalar type ", out.scalar_type(), " for argument 'out'");
}

at::Tensor& polar_out(const at::Tensor& abs, const at::Tensor& angle, at::Tensor& out) {
  check_parts(out, abs, angle);
  return write_out(out, join(at::mul(abs, at::cos(angle)), at::mul(abs, at::sin(angle))));
}
at::Tensor& complex_out(const at::Tensor& real, const at::Tensor& imag, at::Tensor& out) {
  check_parts(out, real, imag);
  return write_out(out, join(real, imag));
}
at::Tensor& conj_physical_out(const at::Tensor& self, at::Tensor& out) {
  if (!self.is_complex()) return write_out(out, self);
  const Planes z = planes(self);
  return write_out(out, join(z.re, at::neg(zero_or(z.im))));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("view_as_real", at::native::view_as_real);
  m.impl("view_as_complex", at::native::view_as_complex);
  m.impl("polar.out", polar_out);
  m.impl("complex.out", complex_out);
  m.impl("conj_physical.out", conj_physical_out);
}

}  // namespace vtpu::bridge::complex
