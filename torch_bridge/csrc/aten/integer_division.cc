// `//` and `%` of int64 tensors by an integer constant or by another int64 tensor on the chip
// (kernels/compose/integer_division.h): the operands' int32 words narrowed within their known bounds,
// floor-divided exactly, widened back. Mixture-of-experts routing computes token indices this way
// (flat slot // top_k). Magnitudes must be known below 2^24; other integer and float divisions
// run on the CPU (floats' floor division rounds as torch's does there), and an integer division
// by zero raises ZeroDivisionError as on the CPU (for a tensor divisor, read before dividing).
#include <ATen/ATen.h>
#include <torch/library.h>

#include "kernels/compose/integer_division.h"
#include "torch_bridge/csrc/aten/variants.h"
#include "torch_bridge/csrc/record/op_support.h"

namespace vtpu::bridge {
namespace {

constexpr int64_t kExact = int64_t{1} << 24;

// The divisor when `other` is an integer constant (a Python number or a 0-d CPU tensor).
std::optional<int64_t> constant_divisor(const at::Tensor& other) {
  if (!is_cpu_scalar(other) || !at::isIntegralType(other.scalar_type(), /*includeBool=*/false)) return std::nullopt;
  return other.item<int64_t>();
}

// The known magnitude of an int64 tpu tensor when it is below 2^24 (nullopt otherwise).
std::optional<int64_t> small_int64(const at::Tensor& t) {
  if (t.scalar_type() != at::kLong || !t.device().is_privateuseone()) return std::nullopt;
  const auto bound = int64_bound_of(t);
  return bound && *bound < kExact ? bound : std::nullopt;
}

// self // other (or %) for two int64 tpu tensors of known magnitude below 2^24, broadcast. A zero
// divisor must raise as on the CPU, so whether any divisor is zero is read first (a
// synchronisation); the division itself is exact (kernels/compose/integer_division.h).
at::Tensor divide_by_tensor(const char* op, const at::Tensor& self, const at::Tensor& other, bool remainder, int64_t bound,
                            int64_t divisor_bound, const CpuFn& cpu) {
  TORCH_CHECK(!at::eq(other, 0).any().item<bool>(), "ZeroDivisionError");
  const auto shape = at::infer_size(self.sizes(), other.sizes());
  const auto a_shape = self.sizes().vec(), b_shape = other.sizes().vec();
  const at::Tensor words = record(op, {index_words(self), index_words(other)}, at::kInt, [&](kernels::Graph& g, const std::vector<int>& v) {
    const int a = g.reshape(g.int64_narrow(v[0], bound + 1, op), a_shape, op);
    const int b = g.reshape(g.int64_narrow(v[1], divisor_bound + 1, op), b_shape, op);
    const auto r = kernels::floor_divide_by(g, a, b, op);
    return int64_words(g, remainder ? r.remainder : r.quotient);
  }, [cpu, self, other](const std::vector<at::Tensor>&) { return cpu({self.cpu(), other.cpu()}); });
  // |floor(a / b)| <= |a| for |b| >= 1; |a mod b| < |b|
  return as_int64(words, remainder ? divisor_bound : bound).view(shape);
}

at::Tensor divide(const char* op, const at::Tensor& self, const at::Tensor& other, bool remainder, const CpuFn& cpu) {
  const auto divisor = constant_divisor(other);
  TORCH_CHECK(!(divisor && *divisor == 0 && at::isIntegralType(self.scalar_type(), true)), "ZeroDivisionError");
  const auto bound = small_int64(self);
  if (!divisor) {
    const auto divisor_bound = small_int64(other);
    if (bound && divisor_bound) return divide_by_tensor(op, self, other, remainder, *bound, *divisor_bound, cpu);
  }
  if (!divisor || !bound || std::abs(*divisor) >= kExact) {
    return run_on_cpu(op, {self, other}, cpu,
                      "operands other than int64 tensors of known magnitude below 2^24, divided by such a tensor or an integer constant");
  }
  const int64_t b = *divisor;
  const at::Tensor words = record(op, {index_words(self)}, at::kInt, [&](kernels::Graph& g, const std::vector<int>& v) {
    const int a = g.int64_narrow(v[0], *bound + 1, op);
    const auto r = kernels::floor_divide(g, a, b, op);
    return int64_words(g, remainder ? r.remainder : r.quotient);
  }, [cpu, self, other](const std::vector<at::Tensor>&) { return cpu({self.cpu(), other}); });  // int64 itself
  return as_int64(words, remainder ? std::abs(b) : *bound / std::abs(b) + 1).view(self.sizes());
}

at::Tensor tpu_floor_divide(const at::Tensor& self, const at::Tensor& other) {
  return divide("floor_divide", self, other, false, [](const std::vector<at::Tensor>& c) { return at::floor_divide(c[0], c[1]); });
}
at::Tensor tpu_floor_divide_scalar(const at::Tensor& self, const at::Scalar& other) {
  return tpu_floor_divide(self, at::scalar_tensor(other, at::TensorOptions().dtype(other.type())));
}
at::Tensor tpu_remainder(const at::Tensor& self, const at::Tensor& other) {
  return divide("remainder", self, other, true, [](const std::vector<at::Tensor>& c) { return at::remainder(c[0], c[1]); });
}
at::Tensor tpu_remainder_scalar(const at::Tensor& self, const at::Scalar& other) {
  return tpu_remainder(self, at::scalar_tensor(other, at::TensorOptions().dtype(other.type())));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("floor_divide", tpu_floor_divide);
  m.impl("floor_divide.Scalar", tpu_floor_divide_scalar);
  m.impl("floor_divide.out", Variants<tpu_floor_divide>::out);
  m.impl("remainder.Tensor", tpu_remainder);
  m.impl("remainder.Scalar", tpu_remainder_scalar);
  m.impl("remainder.Tensor_out", Variants<tpu_remainder>::out);
}

}  // namespace vtpu::bridge
