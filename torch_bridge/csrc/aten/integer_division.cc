// `//`, `%` and fmod of integer tensors on the chip, exact for every int32
// (kernels/compose/integer_division.h): int32, int8 and uint8 tensors computed in int32, and int64
// tensors whose magnitude is known below 2^31 as their int32 words narrowed within those bounds,
// divided, widened back. Mixture-of-experts routing computes token indices this way (flat slot //
// top_k). Other integer divisions (int16, int64 of unknown or larger magnitude) run on the CPU, and
// an integer division by zero raises ZeroDivisionError as on the CPU (for a tensor divisor, read
// before dividing).
// div's rounding modes are here too: trunc from the floor division's remainder, and trunc(a / b)
// of floats.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "kernels/compose/float_remainder.h"
#include "kernels/compose/integer_division.h"
#include "torch_bridge/csrc/aten/pointwise.h"
#include "torch_bridge/csrc/aten/variants.h"
#include "torch_bridge/csrc/record/op_support.h"
#include "torch_bridge/csrc/record/recorder.h"

namespace vtpu::bridge {
namespace {

// Which result of the division an op wants: `//`, `%`, or div(rounding_mode="trunc").
enum class Wanted { FloorQuotient, Remainder, TruncQuotient, TruncRemainder };

// The wanted result from the floor division of a by b: trunc differs from floor by one where the
// division leaves a remainder and a and b differ in sign (the exact quotient is negative).
int wanted_result(kernels::Graph& g, const kernels::FloorDivision& r, int a, int b, int b_negative, Wanted wanted, const char* op) {
  if (wanted == Wanted::Remainder) return r.remainder;
  if (wanted == Wanted::FloorQuotient) return r.quotient;
  const int inexact = g.binary_scalar(kernels::ExprOp::Ne, r.remainder, 0, false, op);
  const int signs_differ = g.binary(kernels::ExprOp::Ne, g.binary_scalar(kernels::ExprOp::Lt, a, 0, false, op), b_negative, op);
  const int off_by_one = g.binary(kernels::ExprOp::And, inexact, signs_differ, op);
  if (wanted == Wanted::TruncQuotient) return g.binary(kernels::ExprOp::Add, r.quotient, g.cast(off_by_one, kernels::DType::I32, op), op);
  // fmod: a - trunc(a / b) b, the floor remainder less b where the quotients differ
  return g.where(off_by_one, g.binary(kernels::ExprOp::Sub, r.remainder, b, op), r.remainder, op);
}

// The wanted result of float operands (kernels/compose/float_remainder.h: exact fmod and torch's
// formulas on it): fmod and remainder computed in f32 and rounded once to `dtype`, floor division
// rounded to it step by step as torch's formula is.
at::Tensor float_divide(const char* op, const at::Tensor& self, const at::Tensor& other, Wanted wanted, c10::ScalarType dtype,
                        const CpuFn& cpu) {
  const auto [a_in, b_in] = with_scalar_uploaded(self, other, dtype);
  const auto shape = at::infer_size(self.sizes(), other.sizes());  // ([1]-shaped constants widen 0-d operands)
  return record(op, {a_in, b_in}, dtype, [&](kernels::Graph& g, const std::vector<int>& v) {
    const auto as = [&](int x, kernels::DType t) { return g.node(x).type.dtype == t ? x : g.cast(x, t, op); };
    const kernels::DType t = to_kernel_dtype(dtype), f32 = kernels::DType::F32;
    if (wanted == Wanted::FloorQuotient) return kernels::floor_divide_f32(g, as(v[0], t), as(v[1], t), op);  // rounds as torch, step by step
    const int a = as(v[0], f32), b = as(v[1], f32);
    return as(wanted == Wanted::Remainder ? kernels::remainder_f32(g, a, b, op) : kernels::fmod_f32(g, a, b, op), t);
  }, cpu).view(shape);
}

// The divisor when `other` is an integer constant (a Python number or a 0-d CPU tensor).
std::optional<int64_t> constant_divisor(const at::Tensor& other) {
  if (!is_cpu_scalar(other) || !at::isIntegralType(other.scalar_type(), /*includeBool=*/false)) return std::nullopt;
  return other.item<int64_t>();
}

bool fits_int32(int64_t v) { return v >= INT32_MIN && v <= INT32_MAX; }

// The known magnitude of an int64 tpu tensor when its values fit int32 (nullopt otherwise).
std::optional<int64_t> int32_sized_int64(const at::Tensor& t) {
  if (t.scalar_type() != at::kLong || !t.device().is_privateuseone()) return std::nullopt;
  const auto bound = int64_bound_of(t);
  return bound && *bound < kernels::kAnyInt32 ? bound : std::nullopt;
}

// A divisor tensor must not hold zero, as on the CPU: read before dividing (a synchronisation).
void check_no_zero_divisor(const at::Tensor& other) { TORCH_CHECK(!at::eq(other, 0).any().item<bool>(), "ZeroDivisionError"); }

// The wanted result of int32 a and b (a tensor of divisors, or the constant `divisor`): exact for
// every int32 (kernels/compose/integer_division.h); `bound` is at least every |a| and |b|.
int divide_int32(kernels::Graph& g, int a, int b, std::optional<int64_t> divisor, int64_t bound, Wanted wanted, const char* op) {
  if (divisor) {
    const auto r = kernels::floor_divide(g, a, *divisor, op, bound);
    const int b_negative = g.cast(g.full({{1}, kernels::DType::I32}, *divisor < 0 ? 1 : 0, op), kernels::DType::Bool, op);
    return wanted_result(g, r, a, g.full({{1}, kernels::DType::I32}, double(*divisor), op), b_negative, wanted, op);
  }
  const auto r = kernels::floor_divide_by(g, a, b, op, bound);
  return wanted_result(g, r, a, b, g.binary_scalar(kernels::ExprOp::Lt, b, 0, false, op), wanted, op);
}

// self // other (or %) when the result is int32, int8 or uint8 (both operands of those types or
// bool, on the chip or Python numbers): computed in int32, whose range holds every quotient but
// INT32_MIN // -1 (which wraps, as on the CPU).
at::Tensor divide_chip_integers(const char* op, const at::Tensor& self, const at::Tensor& other, std::optional<int64_t> divisor,
                                Wanted wanted, c10::ScalarType dtype, const CpuFn& cpu) {
  if (!divisor) check_no_zero_divisor(other);
  const auto shape = at::infer_size(self.sizes(), other.sizes());
  const auto [a_in, b_in] = with_scalar_uploaded(self, other, dtype);
  std::vector<at::Tensor> inputs{a_in};
  if (!divisor) inputs.push_back(b_in);
  return record(op, inputs, dtype, [&](kernels::Graph& g, const std::vector<int>& v) {
    const auto i32 = [&](int x) { return g.node(x).type.dtype == kernels::DType::I32 ? x : g.cast(x, kernels::DType::I32, op); };
    const int result = divide_int32(g, i32(v[0]), divisor ? -1 : i32(v[1]), divisor, kernels::kAnyInt32, wanted, op);
    return g.cast(result, to_kernel_dtype(dtype), op);
    // the CPU gets both operands, the constant too
  }, [cpu, self, other](const std::vector<at::Tensor>&) { return cpu({self.cpu(), other.cpu()}); }).view(shape);
}

// self // other (or %) for int64 tpu tensors of known magnitude below 2^31, by such a tensor
// (broadcast) or an int32 constant: their int32 words narrowed within the bounds, divided exactly,
// widened back.
at::Tensor divide_int64(const char* op, const at::Tensor& self, const at::Tensor& other, std::optional<int64_t> divisor,
                        int64_t bound, int64_t divisor_bound, Wanted wanted, const CpuFn& cpu) {
  if (!divisor) check_no_zero_divisor(other);
  const auto shape = at::infer_size(self.sizes(), other.sizes());
  const auto a_shape = self.sizes().vec(), b_shape = other.sizes().vec();
  std::vector<at::Tensor> inputs{index_words(self)};
  if (!divisor) inputs.push_back(index_words(other));
  const at::Tensor words = record(op, inputs, at::kInt, [&](kernels::Graph& g, const std::vector<int>& v) {
    const int a = g.reshape(g.int64_narrow(v[0], bound + 1, op), a_shape, op);
    const int b = divisor ? -1 : g.reshape(g.int64_narrow(v[1], divisor_bound + 1, op), b_shape, op);
    return int64_words(g, divide_int32(g, a, b, divisor, std::max(bound, divisor_bound), wanted, op));
  }, [cpu, self, other](const std::vector<at::Tensor>&) { return cpu({self.cpu(), other.is_cpu() ? other : other.cpu()}); });
  // |floor(a / b)| <= |a| / |b| + 1 (by a constant b; |a| for any |b| >= 1); |a mod b| < |b|
  const bool remainder = wanted == Wanted::Remainder || wanted == Wanted::TruncRemainder;
  const int64_t quotient_bound = divisor ? bound / std::abs(*divisor) + 1 : bound;
  return as_int64(words, remainder ? divisor_bound : quotient_bound).view(shape);
}

bool is_chip_integer(c10::ScalarType t) { return t == at::kInt || t == at::kChar || t == at::kByte || t == at::kBool; }

at::Tensor divide(const char* op, const at::Tensor& self, const at::Tensor& other, Wanted wanted, const CpuFn& cpu) {
  const auto dtype = at::result_type(self, other);
  if (is_chip_float(dtype)) return float_divide(op, self, other, wanted, dtype, cpu);
  const auto divisor = constant_divisor(other);
  TORCH_CHECK(!(divisor && *divisor == 0 && at::isIntegralType(self.scalar_type(), true)), "ZeroDivisionError");
  const bool on_chip = self.device().is_privateuseone() || other.device().is_privateuseone();
  if (on_chip && dtype != at::kBool && is_chip_integer(dtype) && (is_chip_integer(self.scalar_type()) || is_cpu_scalar(self)) &&
      (divisor ? fits_int32(*divisor) : is_chip_integer(other.scalar_type()))) {
    return divide_chip_integers(op, self, other, divisor, wanted, dtype, cpu);
  }
  const auto bound = int32_sized_int64(self);
  if (bound && divisor && fits_int32(*divisor)) return divide_int64(op, self, other, divisor, *bound, std::abs(*divisor), wanted, cpu);
  if (bound && !divisor) {
    if (const auto divisor_bound = int32_sized_int64(other)) return divide_int64(op, self, other, divisor, *bound, *divisor_bound, wanted, cpu);
  }
  return run_on_cpu(op, {self, other}, cpu,
                    "operands other than int32, int8 or uint8 tensors, or int64 tensors of known magnitude below 2^31, divided by "
                    "such a tensor or an integer constant");
}

at::Tensor tpu_floor_divide(const at::Tensor& self, const at::Tensor& other) {
  return divide("floor_divide", self, other, Wanted::FloorQuotient, [](const std::vector<at::Tensor>& c) { return at::floor_divide(c[0], c[1]); });
}
at::Tensor tpu_floor_divide_scalar(const at::Tensor& self, const at::Scalar& other) {
  return tpu_floor_divide(self, at::scalar_tensor(other, at::TensorOptions().dtype(other.type())));
}
at::Tensor tpu_remainder(const at::Tensor& self, const at::Tensor& other) {
  return divide("remainder", self, other, Wanted::Remainder, [](const std::vector<at::Tensor>& c) { return at::remainder(c[0], c[1]); });
}
at::Tensor tpu_remainder_scalar(const at::Tensor& self, const at::Scalar& other) {
  return tpu_remainder(self, at::scalar_tensor(other, at::TensorOptions().dtype(other.type())));
}
at::Tensor tpu_remainder_scalar_tensor(const at::Scalar& self, const at::Tensor& other) {
  return tpu_remainder(pointwise::wrapped_scalar(self), other);  // Python's `number % tensor`
}

// div with a rounding mode. Integers: `//` or its trunc form as above. Floats: trunc(a / b) as torch
// computes it (the quotient rounded once, in f32 for bf16 and f16 too); floor division of floats
// needs torch's exact fmod and runs on the CPU.
at::Tensor tpu_div_mode(const at::Tensor& self, const at::Tensor& other, std::optional<c10::string_view> mode) {
  if (!mode) return at::div(self, other);
  const std::string rounding(*mode);
  const CpuFn cpu = [rounding](const std::vector<at::Tensor>& c) { return at::div(c[0], c[1], rounding); };
  const auto dtype = at::result_type(self, other);
  if (at::isIntegralType(dtype, /*includeBool=*/true)) {
    return divide("div", self, other, rounding == "trunc" ? Wanted::TruncQuotient : Wanted::FloorQuotient, cpu);
  }
  if (rounding != "trunc") return divide("div", self, other, Wanted::FloorQuotient, cpu);
  if (dtype == at::kFloat) return at::trunc(at::div(self, other));
  const auto f32 = [](const at::Tensor& t) { return at::isFloatingType(t.scalar_type()) ? t.to(at::kFloat) : t; };
  return at::trunc(at::div(f32(self), f32(other))).to(dtype);
}
at::Tensor tpu_fmod(const at::Tensor& self, const at::Tensor& other) {
  return divide("fmod", self, other, Wanted::TruncRemainder, [](const std::vector<at::Tensor>& c) { return at::fmod(c[0], c[1]); });
}
at::Tensor tpu_fmod_scalar(const at::Tensor& self, const at::Scalar& other) { return tpu_fmod(self, pointwise::wrapped_scalar(other)); }
at::Tensor tpu_div_scalar_mode(const at::Tensor& self, const at::Scalar& other, std::optional<c10::string_view> mode) {
  return tpu_div_mode(self, pointwise::wrapped_scalar(other), mode);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("fmod.Tensor", tpu_fmod);
  m.impl("fmod.Scalar", tpu_fmod_scalar);
  m.impl("fmod_.Tensor", Variants<tpu_fmod>::inplace);
  m.impl("fmod_.Scalar", Variants<tpu_fmod_scalar>::inplace);
  m.impl("fmod.Tensor_out", Variants<tpu_fmod>::out);
  m.impl("fmod.Scalar_out", Variants<tpu_fmod_scalar>::out);
  m.impl("div.Tensor_mode", tpu_div_mode);
  m.impl("div.Scalar_mode", tpu_div_scalar_mode);
  m.impl("div.out_mode", Variants<tpu_div_mode>::out);
  m.impl("floor_divide", tpu_floor_divide);
  m.impl("floor_divide.Scalar", tpu_floor_divide_scalar);
  m.impl("floor_divide.out", Variants<tpu_floor_divide>::out);
  m.impl("remainder.Tensor", tpu_remainder);
  m.impl("remainder.Scalar", tpu_remainder_scalar);
  m.impl("remainder.Tensor_out", Variants<tpu_remainder>::out);
  m.impl("remainder.Scalar_Tensor", tpu_remainder_scalar_tensor);
}

}  // namespace vtpu::bridge
