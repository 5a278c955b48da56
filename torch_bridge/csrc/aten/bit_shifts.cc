// Bit shifts (`<<`, `>>`, bitwise_left_shift, bitwise_right_shift, in place and out=) of integer
// tensors on the chip (kernels/compose/bit_shifts.h), with torch's rules for amounts outside the
// dtype's width: int32, int8 and uint8 computed in int32, a narrower dtype's left shifts wrapped
// back to it; int64 tensors of known magnitude as their int32 words narrowed, where the result
// stays below 2^31 (right shifts always; a left shift needs |a| 2^s below it for the largest
// amount). Quantization code packs and unpacks int4 and int8 values this way. Others run on the
// CPU, named.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "kernels/compose/bit_shifts.h"
#include "kernels/compose/integer_division.h"  // kAnyInt32
#include "kernels/compose/integer_wrap.h"
#include "torch_bridge/csrc/aten/pointwise.h"
#include "torch_bridge/csrc/aten/variants.h"
#include "torch_bridge/csrc/record/cpu_scalar.h"
#include "torch_bridge/csrc/record/op_support.h"
#include "torch_bridge/csrc/record/recorder.h"

namespace vtpu::bridge {
namespace {

using kernels::DType;
using kernels::ExprOp;
using kernels::Graph;

enum class Direction { Left, Right };


std::optional<int64_t> constant_amount(const at::Tensor& other) {
  if (!is_cpu_scalar(other) || !at::isIntegralType(other.scalar_type(), /*includeBool=*/false)) return std::nullopt;
  return other.item<int64_t>();
}

int shifted(Graph& g, Direction d, int a, int s, std::optional<int64_t> amount, int bits, bool is_signed, const char* op) {
  if (d == Direction::Left) return amount ? kernels::shift_left_by(g, a, *amount, bits, op) : kernels::shift_left(g, a, s, bits, op);
  return amount ? kernels::shift_right_by(g, a, *amount, bits, is_signed, op) : kernels::shift_right(g, a, s, bits, is_signed, op);
}

int as_i32(Graph& g, int x, const char* op) { return g.node(x).type.dtype == DType::I32 ? x : g.cast(x, DType::I32, op); }

// int32, int8 and uint8: an 8-bit left shift keeps its low byte, as the CPU's stores do.
at::Tensor shift_chip_integers(const char* op, Direction d, const at::Tensor& self, const at::Tensor& other,
                               std::optional<int64_t> amount, c10::ScalarType dtype, const CpuFn& cpu) {
  const int bits = dtype == at::kInt ? 32 : 8;
  const auto shape = at::infer_size(self.sizes(), other.sizes());
  const auto [a_in, s_in] = with_scalar_uploaded(self, other, dtype);
  std::vector<at::Tensor> inputs{a_in};
  if (!amount) inputs.push_back(s_in);
  return record(op, inputs, dtype, [&](Graph& g, const std::vector<int>& v) {
    int r = shifted(g, d, as_i32(g, v[0], op), amount ? -1 : as_i32(g, v[1], op), amount, bits, dtype != at::kByte, op);
    if (d == Direction::Left && bits == 8) r = kernels::wrap_to_byte(g, r, dtype == at::kChar, op);
    return g.cast(r, to_kernel_dtype(dtype), op);
    // the CPU gets both operands, the constant too
  }, [cpu, self, other](const std::vector<at::Tensor>&) { return cpu({self.cpu(), other.cpu()}); }).view(shape);
}

// int64 of known magnitude; nullopt where the result's bound is not known below 2^31.
std::optional<at::Tensor> shift_int64(const char* op, Direction d, const at::Tensor& self, const at::Tensor& other,
                                      std::optional<int64_t> amount, const CpuFn& cpu) {
  const auto base = constant_amount(self);  // a number shifted by a tensor (torch's bicubic: 1 << (precision + 1))
  const auto a_bound = base                                                            ? std::optional(std::abs(*base))
                       : self.device().is_privateuseone() && self.scalar_type() == at::kLong ? int64_bound_of(self)
                                                                                            : std::nullopt;
  const bool words_amount = !amount && other.scalar_type() == at::kLong;
  const auto s_bound = amount ? std::optional(std::abs(*amount)) : words_amount ? int64_bound_of(other) : std::nullopt;
  if (!a_bound || *a_bound >= kernels::kAnyInt32 || (words_amount && (!s_bound || *s_bound >= kernels::kAnyInt32))) return std::nullopt;
  int64_t bound = *a_bound;  // right shifts only shrink magnitudes
  if (d == Direction::Left) {
    if (!s_bound || *s_bound > 30 || (*a_bound << *s_bound) >= kernels::kAnyInt32) return std::nullopt;
    bound = *a_bound << *s_bound;
  }
  if (!amount && !other.device().is_privateuseone()) return std::nullopt;  // a CPU tensor of amounts
  const auto shape = at::infer_size(self.sizes(), other.sizes());
  const auto a_shape = self.sizes().vec(), s_shape = other.sizes().vec();
  std::vector<at::Tensor> inputs;
  if (!base) inputs.push_back(index_words(self));
  if (!amount) inputs.push_back(words_amount ? index_words(other) : other);
  const at::Tensor words = record(op, inputs, at::kInt, [&](Graph& g, const std::vector<int>& v) {
    const int a = base ? g.full({{1}, DType::I32}, double(*base), op) : g.reshape(g.int64_narrow(v[0], *a_bound + 1, op), a_shape, op);
    const int next = base ? 0 : 1;
    int s = -1;
    if (!amount) s = words_amount ? g.reshape(g.int64_narrow(v[next], *s_bound + 1, op), s_shape, op) : as_i32(g, v[next], op);
    return int64_words(g, shifted(g, d, a, s, amount, 64, true, op));
  }, [cpu, self, other](const std::vector<at::Tensor>&) { return cpu({self.cpu(), other.is_cpu() ? other : other.cpu()}); });
  return as_int64(words, bound).view(shape);
}

at::Tensor shift(const char* op, Direction d, const at::Tensor& self, const at::Tensor& other, const CpuFn& cpu) {
  const auto dtype = at::result_type(self, other);
  if (!at::isIntegralType(dtype, /*includeBool=*/false)) return run_on_cpu(op, {self, other}, cpu, "inputs other than integers");
  const auto amount = constant_amount(other);
  if (dtype == at::kInt || dtype == at::kChar || dtype == at::kByte) {
    return shift_chip_integers(op, d, self, other, amount, dtype, cpu);
  }
  if (dtype == at::kLong) {
    if (auto out = shift_int64(op, d, self, other, amount, cpu)) return *out;
  }
  return run_on_cpu(op, {self, other}, cpu,
                    "int16, or int64 whose magnitude (or, shifting left, whose magnitude times 2^amount) is not known below 2^31");
}

at::Tensor tpu_left(const at::Tensor& self, const at::Tensor& other) {
  return shift("bitwise_left_shift", Direction::Left, self, other,
               [](const std::vector<at::Tensor>& c) { return at::bitwise_left_shift(c[0], c[1]); });
}
at::Tensor tpu_right(const at::Tensor& self, const at::Tensor& other) {
  return shift("bitwise_right_shift", Direction::Right, self, other,
               [](const std::vector<at::Tensor>& c) { return at::bitwise_right_shift(c[0], c[1]); });
}
at::Tensor tpu_left_scalar(const at::Tensor& self, const at::Scalar& other) { return tpu_left(self, pointwise::wrapped_scalar(other)); }
at::Tensor tpu_right_scalar(const at::Tensor& self, const at::Scalar& other) { return tpu_right(self, pointwise::wrapped_scalar(other)); }
at::Tensor tpu_scalar_left(const at::Scalar& self, const at::Tensor& other) { return tpu_left(pointwise::wrapped_scalar(self), other); }
at::Tensor tpu_scalar_right(const at::Scalar& self, const at::Tensor& other) { return tpu_right(pointwise::wrapped_scalar(self), other); }

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("bitwise_left_shift.Tensor", tpu_left);
  m.impl("bitwise_left_shift.Tensor_Scalar", tpu_left_scalar);
  m.impl("bitwise_left_shift.Scalar_Tensor", tpu_scalar_left);
  m.impl("bitwise_left_shift_.Tensor", Variants<tpu_left>::inplace);
  m.impl("bitwise_left_shift_.Tensor_Scalar", Variants<tpu_left_scalar>::inplace);
  m.impl("bitwise_left_shift.Tensor_out", Variants<tpu_left>::out);
  m.impl("bitwise_left_shift.Tensor_Scalar_out", Variants<tpu_left_scalar>::out);
  m.impl("__lshift__.Tensor", tpu_left);
  m.impl("__lshift__.Scalar", tpu_left_scalar);
  m.impl("__ilshift__.Tensor", Variants<tpu_left>::inplace);
  m.impl("__ilshift__.Scalar", Variants<tpu_left_scalar>::inplace);
  m.impl("bitwise_right_shift.Tensor", tpu_right);
  m.impl("bitwise_right_shift.Tensor_Scalar", tpu_right_scalar);
  m.impl("bitwise_right_shift.Scalar_Tensor", tpu_scalar_right);
  m.impl("bitwise_right_shift_.Tensor", Variants<tpu_right>::inplace);
  m.impl("bitwise_right_shift_.Tensor_Scalar", Variants<tpu_right_scalar>::inplace);
  m.impl("bitwise_right_shift.Tensor_out", Variants<tpu_right>::out);
  m.impl("bitwise_right_shift.Tensor_Scalar_out", Variants<tpu_right_scalar>::out);
  m.impl("__rshift__.Tensor", tpu_right);
  m.impl("__rshift__.Scalar", tpu_right_scalar);
  m.impl("__irshift__.Tensor", Variants<tpu_right>::inplace);
  m.impl("__irshift__.Scalar", Variants<tpu_right_scalar>::inplace);
}

}  // namespace vtpu::bridge
