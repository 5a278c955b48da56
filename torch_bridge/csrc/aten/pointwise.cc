// Pointwise aten ops on the chip: each records one elementwise graph node (fused with its
// neighbours at the flush). Most are rows of the op table below; the rest (gelu, softplus,
// add/sub with alpha, clamp, where, masked_fill, fill) are written out.
#include <ATen/ATen.h>

#include <torch/library.h>

#include "torch_bridge/csrc/aten/complex.h"
#include "torch_bridge/csrc/aten/int64.h"
#include "torch_bridge/csrc/aten/pointwise.h"
#include "torch_bridge/csrc/aten/integer_power.h"
#include "torch_bridge/csrc/aten/variants.h"
#include "torch_bridge/csrc/record/op_support.h"

namespace vtpu::bridge {
namespace {

using kernels::ExprOp;
using kernels::Graph;
using kernels::RowOp;

at::Tensor unary(const char* op, ExprOp e, const at::Tensor& self, const CpuFn& cpu) {
  if (complex::involved(self)) return complex::unary(op, e, self, cpu);
  TORCH_CHECK(e != ExprOp::Neg || self.scalar_type() != at::kBool,  // torch's check (neg's meta function)
              "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert a mask, use the `~` "
              "or `logical_not()` operator instead.");
  if (e == ExprOp::Neg || e == ExprOp::Abs) {
    if (auto words = int64_sign_op(op, e, self, cpu)) return *words;
  }
  if (e == ExprOp::Relu && self.scalar_type() == at::kLong) return at::clamp_min(self, 0);  // on int64's words, any magnitude
  const auto dtype = at::isIntegralType(self.scalar_type(), true) && e != ExprOp::Neg && e != ExprOp::Abs && e != ExprOp::Relu
                         ? at::kFloat
                         : self.scalar_type();
  // int64 (word pairs, no elementwise kernels) promotes to f32 first, as torch's CPU promotes it
  if (self.scalar_type() == at::kLong && dtype == at::kFloat) return unary(op, e, self.to(at::kFloat), cpu);
  return record_elementwise(op, {self}, dtype, [&](Graph& g, const std::vector<int>& v) { return g.unary(e, v[0]); }, cpu);
}

// self (op) other, where other may be a wrapped Python number; alpha scales other (add/sub).
at::Tensor binary(const char* op, ExprOp e, const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha,
                  const CpuFn& cpu, bool comparison = false) {
  if (complex::involved(self, other)) return complex::binary(op, e, self, other, alpha, cpu);
  const auto dtype = comparison ? at::kBool : at::result_type(self, other);
  const bool true_div = e == ExprOp::Div && at::isIntegralType(dtype, true);
  const auto result = true_div ? at::kFloat : dtype;
  const double a = alpha.toDouble();
  if (kernels::is_bitwise(e) && !at::isIntegralType(result, /*includeBool=*/true)) {
    return run_on_cpu(op, {self, other}, cpu, "floating-point inputs");  // where torch says why it refuses them
  }
  if (e == ExprOp::Pow && at::isIntegralType(result, /*includeBool=*/true)) return integer_pow(self, other, cpu);  // exact, not f32
  if (auto words = int64_binary(op, e, self, other, a, result, cpu)) return *words;
  // A comparison converts a Python number to the operands' common dtype first, as torch's CPU
  // does: bf16(x) == 0.1 compares with bf16(0.1), int8(x) == 254 with int8(254) = -2.
  const auto number = [&](const at::Tensor& scalar) {
    return comparison ? scalar.to(at::result_type(self, other)).item().toDouble() : scalar.item().toDouble();
  };
  if (is_cpu_scalar(other)) {
    const double s = number(other) * a;
    // Both go to record: the CPU fallback needs the scalar too; only device tensors get values.
    return record_elementwise(op, {self, other}, result, [&](Graph& g, const std::vector<int>& v) { return g.binary_scalar(e, v[0], s); }, cpu);
  }
  if (is_cpu_scalar(self)) {
    const double s = number(self);
    return record_elementwise(op, {self, other}, result, [&](Graph& g, const std::vector<int>& v) {
      const int o = a == 1.0 ? v[0] : g.binary_scalar(ExprOp::Mul, v[0], a);
      return g.binary_scalar(e, o, s, /*scalar_first=*/true);
    }, cpu);
  }
  if (a != 1.0 && at::isFloatingType(result)) {
    // torch's CPU scales and adds in one f32 fused multiply-add (fmadd(other, alpha, self)) and
    // rounds once to the result's dtype. Scaling in the operand's dtype first (a bf16 other times
    // alpha, rounded to bf16) loses bits the CPU keeps; a separate f32 multiply rounds twice. For
    // bf16 and f16 results the CPU first rounds alpha to that dtype. (Its scalar loop, which serves
    // the last elements short of a vector, rounds the product too: there the chip can differ by
    // one ulp of the 16-bit dtype.)
    const double scale_value = result == at::kBFloat16 ? static_cast<float>(c10::BFloat16(static_cast<float>(a)))
                               : result == at::kHalf   ? static_cast<float>(c10::Half(static_cast<float>(a)))
                                                       : static_cast<float>(a);
    return record_elementwise(op, {self, other}, result, [&](Graph& g, const std::vector<int>& v) {
      const auto f32 = [&](int x) { return g.node(x).type.dtype == kernels::DType::F32 ? x : g.cast(x, kernels::DType::F32, op); };
      const int o = f32(v[1]);
      const int scale = g.full({g.node(o).type.shape, kernels::DType::F32}, e == ExprOp::Sub ? -scale_value : scale_value, op);
      return g.fma(o, scale, f32(v[0]), op);
    }, cpu);
  }
  return record_elementwise(op, {self, other}, result, [&](Graph& g, const std::vector<int>& v) {
    const int o = a == 1.0 ? v[1] : g.binary_scalar(ExprOp::Mul, v[1], a);
    return g.binary(e, v[0], o);
  }, cpu);
}

// The pointwise op table: one row per op, expanded below into its lowering, its in-place and out=
// variants (one lowering serves all three) and their registrations, so adding an op is one row.
// Columns: the C++ name (also the op's label in stats), the aten overloads it registers
// (functional, in-place or "" where aten has none, out=), the ExprOp it lowers to, torch's CPU
// function. Unary ops register NAME, NAME_ and NAME.out; comparisons NAME.Tensor/.Scalar, their
// in-place NAME_ and out= forms.
#define VTPU_UNARY_OPS(X)                          \
  X(neg, "neg", Neg, at::neg)                      \
  X(exp, "exp", Exp, at::exp)                      \
  X(log, "log", Log, at::log)                      \
  X(tanh, "tanh", Tanh, at::tanh)                  \
  X(sigmoid, "sigmoid", Sigmoid, at::sigmoid)      \
  X(relu, "relu", Relu, at::relu)                  \
  X(silu, "silu", Silu, at::silu)                  \
  X(sqrt, "sqrt", Sqrt, at::sqrt)                  \
  X(rsqrt, "rsqrt", Rsqrt, at::rsqrt)              \
  X(abs, "abs", Abs, at::abs)                      \
  X(reciprocal, "reciprocal", Reciprocal, at::reciprocal) \
  X(erf, "erf", Erf, at::erf)                      \
  X(sin, "sin", Sin, at::sin)                      \
  X(cos, "cos", Cos, at::cos)

#define VTPU_BINARY_OPS(X)                                                         \
  X(mul, "mul.Tensor", "mul_.Tensor", "mul.out", Mul, at::mul)                     \
  X(div, "div.Tensor", "div_.Tensor", "div.out", Div, at::div)                     \
  X(maximum, "maximum", "", "maximum.out", Max, at::maximum)                       \
  X(minimum, "minimum", "", "minimum.out", Min, at::minimum)                       \
  X(pow_tensor, "pow.Tensor_Tensor", "pow_.Tensor", "pow.Tensor_Tensor_out", Pow, at::pow)                 \
  X(bitwise_and, "bitwise_and.Tensor", "bitwise_and_.Tensor", "bitwise_and.Tensor_out", BitAnd, at::bitwise_and) \
  X(bitwise_or, "bitwise_or.Tensor", "bitwise_or_.Tensor", "bitwise_or.Tensor_out", BitOr, at::bitwise_or)       \
  X(bitwise_xor, "bitwise_xor.Tensor", "bitwise_xor_.Tensor", "bitwise_xor.Tensor_out", BitXor, at::bitwise_xor)

// Comparisons register their .Tensor and .Scalar overloads.
#define VTPU_COMPARE_OPS(X) \
  X(eq, Eq, at::eq)         \
  X(ne, Ne, at::ne)         \
  X(lt, Lt, at::lt)         \
  X(le, Le, at::le)         \
  X(gt, Gt, at::gt)         \
  X(ge, Ge, at::ge)

#define VTPU_DEFINE_UNARY(name, schema, expr, aten_call)                                                    \
  at::Tensor tpu_##name(const at::Tensor& self) {                                                           \
    return unary(#name, ExprOp::expr, self, [](const std::vector<at::Tensor>& c) { return aten_call(c[0]); }); \
  }
VTPU_UNARY_OPS(VTPU_DEFINE_UNARY)
#undef VTPU_DEFINE_UNARY

#define VTPU_DEFINE_BINARY(name, schema, inplace_schema, out_schema, expr, aten_call)                                         \
  at::Tensor tpu_##name(const at::Tensor& self, const at::Tensor& other) {                                                   \
    return binary(#name, ExprOp::expr, self, other, 1, [](const std::vector<at::Tensor>& c) { return aten_call(c[0], c[1]); }); \
  }
VTPU_BINARY_OPS(VTPU_DEFINE_BINARY)
#undef VTPU_DEFINE_BINARY

#define VTPU_DEFINE_COMPARE(name, expr, aten_call)                                                                                 \
  at::Tensor tpu_##name(const at::Tensor& self, const at::Tensor& other) {                                                         \
    return binary(#name, ExprOp::expr, self, other, 1, [](const std::vector<at::Tensor>& c) { return aten_call(c[0], c[1]); }, true); \
  }                                                                                                                                \
  at::Tensor tpu_##name##_scalar(const at::Tensor& self, const at::Scalar& other) { return tpu_##name(self, wrapped_scalar(other)); }
VTPU_COMPARE_OPS(VTPU_DEFINE_COMPARE)
#undef VTPU_DEFINE_COMPARE

at::Tensor tpu_gelu(const at::Tensor& self, c10::string_view approximate) {
  TORCH_CHECK(approximate == "none" || approximate == "tanh", "approximate argument must be either none or tanh.");
  const bool tanh = approximate == "tanh";
  const std::string approx(approximate);
  return unary("gelu", tanh ? ExprOp::GeluTanh : ExprOp::GeluErf, self,
               [approx](const std::vector<at::Tensor>& c) { return at::gelu(c[0], approx); });
}

// softplus(x) = log(1 + exp(beta x)) / beta, as max(beta x, 0) + log(1 + exp(-|beta x|)) so exp
// never overflows; x itself past the threshold, as torch. Where torch's log1p keeps the tiny
// values of very negative inputs, 1 + exp(-|beta x|) rounds to 1: an absolute error below 6e-8 / beta.
at::Tensor tpu_softplus(const at::Tensor& self, const at::Scalar& beta, const at::Scalar& threshold) {
  const double b = beta.toDouble(), t = threshold.toDouble();
  const auto cpu = [beta, threshold](const std::vector<at::Tensor>& c) { return at::softplus(c[0], beta, threshold); };
  if (!at::isFloatingType(self.scalar_type())) return run_on_cpu("softplus", {self}, cpu, "integer inputs");
  return record_elementwise("softplus", {self}, self.scalar_type(), [&](Graph& g, const std::vector<int>& v) {
    const int bx = g.binary_scalar(ExprOp::Mul, v[0], b);
    const int tail = g.unary(ExprOp::Log, g.binary_scalar(ExprOp::Add, g.unary(ExprOp::Exp, g.unary(ExprOp::Neg, g.unary(ExprOp::Abs, bx))), 1));
    const int soft = g.binary_scalar(ExprOp::Div, g.binary(ExprOp::Add, g.binary_scalar(ExprOp::Max, bx, 0), tail), b);
    return g.where(g.binary_scalar(ExprOp::Gt, bx, t), v[0], soft, "softplus");
  }, cpu);
}

at::Tensor tpu_add(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  return binary("add", ExprOp::Add, self, other, alpha,
                [alpha](const std::vector<at::Tensor>& c) { return at::add(c[0], c[1], alpha); });
}
at::Tensor tpu_sub(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  return binary("sub", ExprOp::Sub, self, other, alpha,
                [alpha](const std::vector<at::Tensor>& c) { return at::sub(c[0], c[1], alpha); });
}

at::Tensor tpu_pow_scalar(const at::Tensor& self, const at::Scalar& exponent) {
  return tpu_pow_tensor(self, wrapped_scalar(exponent));
}
// base ** tensor (ALiBi slopes, relative-position scales; integer results exact, integer_power.cc)
at::Tensor tpu_scalar_pow(const at::Scalar& base, const at::Tensor& exponent) {
  const at::Tensor b = wrapped_scalar(base);
  if (at::isIntegralType(at::result_type(b, exponent), /*includeBool=*/true)) {
    return integer_pow(b, exponent, [base](const std::vector<at::Tensor>& c) { return at::pow(base, c[1]); });
  }
  const auto dtype = at::result_type(b, exponent);  // an integer exponent converts first, as torch's does
  return tpu_pow_tensor(b, exponent.scalar_type() == dtype ? exponent : exponent.to(dtype));
}

at::Tensor tpu_clamp(const at::Tensor& self, const std::optional<at::Scalar>& lo, const std::optional<at::Scalar>& hi) {
  if (self.scalar_type() == at::kLong && (!lo || lo->isIntegral(false)) && (!hi || hi->isIntegral(false))) {
    // int64 through maximum/minimum's word-pair path (values of known magnitude; else the CPU)
    at::Tensor x = self;
    if (lo) x = tpu_maximum(x, wrapped_scalar(*lo));
    if (hi) x = tpu_minimum(x, wrapped_scalar(*hi));
    return x.is_same(self) ? self.clone() : x;
  }
  const auto lo_v = lo ? std::optional<double>(lo->toDouble()) : std::nullopt;
  const auto hi_v = hi ? std::optional<double>(hi->toDouble()) : std::nullopt;
  return record_elementwise("clamp", {self}, self.scalar_type(), [&](Graph& g, const std::vector<int>& v) {
    int x = v[0];
    if (lo_v) x = g.binary_scalar(ExprOp::Max, x, *lo_v);
    if (hi_v) x = g.binary_scalar(ExprOp::Min, x, *hi_v);
    return x;
  }, [lo, hi](const std::vector<at::Tensor>& c) { return at::clamp(c[0], lo, hi); });
}

at::Tensor tpu_where(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other) {
  const auto cpu = [](const std::vector<at::Tensor>& c) { return at::where(c[0], c[1], c[2]); };
  if (is_cpu_scalar(condition)) {  // a host 0-dim condition: one element on the chip, as the other operands are
    const auto dev = self.device().is_privateuseone() ? self.device() : other.device();
    return tpu_where(condition.to(dev), self, other);
  }
  if (complex::involved(self, other)) return complex::where(condition, self, other, cpu);
  const auto dtype = at::result_type(self, other);
  if (is_cpu_scalar(other) || is_cpu_scalar(self)) {  // scalars become device tensors of one element
    const auto dev = condition.device();
    return tpu_where(condition, is_cpu_scalar(self) ? self.to(dev, dtype) : self, is_cpu_scalar(other) ? other.to(dev, dtype) : other);
  }
  if (dtype == at::kLong) return int64_where(condition, self, other);
  return record_elementwise("where", {condition, self, other}, dtype,
                            [&](Graph& g, const std::vector<int>& v) { return g.where(v[0], v[1], v[2]); }, cpu);
}

at::Tensor tpu_masked_fill(const at::Tensor& self, const at::Tensor& mask, const at::Scalar& value) {
  return tpu_where(mask, at::scalar_tensor(value, self.scalar_type()), self);
}
// The value a 0-dim tensor: a host one as its scalar, a device one selected where the mask holds.
at::Tensor tpu_masked_fill_tensor(const at::Tensor& self, const at::Tensor& mask, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with ",
              value.dim(), " dimension(s).");
  // a complex value into a real tensor: read, so torch's conversion check refuses a nonzero imaginary part
  if (value.is_cpu() || (value.is_complex() && !self.is_complex())) return tpu_masked_fill(self, mask, value.item());
  return tpu_where(mask, value.to(self.scalar_type()), self);
}
// torch.zeros / ones / full: a constant kernel writing self, which is never read (so a fresh
// tensor stays without HBM until the flush).
at::Tensor& tpu_fill_(at::Tensor& self, const at::Scalar& value) {
  if (self.is_complex()) {
    complex::fill(self, value.toComplexDouble());
    return self;
  }
  constexpr int64_t kExactInDouble = int64_t{1} << 53;
  if (self.scalar_type() == at::kLong && value.isIntegral(false) &&
      (value.toLong() > kExactInDouble || value.toLong() < -kExactInDouble)) {
    // the fill kernel's constant is a double: larger int64 values go over from the host exactly
    self.copy_(at::full(self.sizes(), value, self.options().device(at::kCPU)));
    return self;
  }
  fill_on_chip(self, value.toDouble());
  return self;
}
at::Tensor& tpu_zero_(at::Tensor& self) { return fill_(self, 0); }

}  // namespace

namespace pointwise {

at::Tensor add(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) { return tpu_add(self, other, alpha); }
at::Tensor mul(const at::Tensor& self, const at::Tensor& other) { return tpu_mul(self, other); }
at::Tensor sqrt(const at::Tensor& self) { return tpu_sqrt(self); }
at::Tensor wrapped_scalar(const at::Scalar& s) { return bridge::wrapped_scalar(s); }

}  // namespace pointwise

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
#define VTPU_REGISTER_UNARY(name, schema, ...) \
  m.impl(schema, tpu_##name);                  \
  m.impl(#name "_", Variants<tpu_##name>::inplace); \
  m.impl(#name ".out", Variants<tpu_##name>::out);
  VTPU_UNARY_OPS(VTPU_REGISTER_UNARY)
#undef VTPU_REGISTER_UNARY
#define VTPU_REGISTER_BINARY(name, schema, inplace_schema, out_schema, ...) \
  m.impl(schema, tpu_##name);                                               \
  if (*inplace_schema) m.impl(inplace_schema, Variants<tpu_##name>::inplace); \
  m.impl(out_schema, Variants<tpu_##name>::out);
  VTPU_BINARY_OPS(VTPU_REGISTER_BINARY)
#undef VTPU_REGISTER_BINARY
#define VTPU_REGISTER_COMPARE(name, ...)                 \
  m.impl(#name ".Tensor", tpu_##name);                   \
  m.impl(#name ".Scalar", tpu_##name##_scalar);          \
  m.impl(#name "_.Tensor", Variants<tpu_##name>::inplace);               \
  m.impl(#name "_.Scalar", Variants<tpu_##name##_scalar>::inplace);      \
  m.impl(#name ".Tensor_out", Variants<tpu_##name>::out);                \
  m.impl(#name ".Scalar_out", Variants<tpu_##name##_scalar>::out);
  VTPU_COMPARE_OPS(VTPU_REGISTER_COMPARE)
#undef VTPU_REGISTER_COMPARE
  m.impl("gelu", tpu_gelu);
  m.impl("softplus", tpu_softplus);
  m.impl("add.Tensor", tpu_add);
  m.impl("sub.Tensor", tpu_sub);
  m.impl("add_.Tensor", Variants<tpu_add>::inplace);
  m.impl("sub_.Tensor", Variants<tpu_sub>::inplace);
  m.impl("add.out", Variants<tpu_add>::out);  // not torch's decomposition: it scales `other` apart
  m.impl("sub.out", Variants<tpu_sub>::out);
  m.impl("pow.Tensor_Scalar", tpu_pow_scalar);
  m.impl("pow.Scalar", tpu_scalar_pow);
  m.impl("pow.Scalar_out", Variants<tpu_scalar_pow>::out);
  m.impl("clamp", tpu_clamp);
  m.impl("where.self", tpu_where);
  m.impl("where.self_out", Variants<tpu_where>::out);
  m.impl("masked_fill.Scalar", tpu_masked_fill);
  m.impl("masked_fill_.Scalar", Variants<tpu_masked_fill>::inplace);
  m.impl("masked_fill.Tensor", tpu_masked_fill_tensor);
  m.impl("masked_fill_.Tensor", Variants<tpu_masked_fill_tensor>::inplace);
  m.impl("fill_.Scalar", tpu_fill_);
  m.impl("zero_", tpu_zero_);
}

}  // namespace vtpu::bridge
