// `//` and `%` of int64 tensors by an integer constant on the chip (kernels/integer_division.h):
// the operand's int32 words narrowed within its known bound, floor-divided exactly, widened back.
// Mixture-of-experts routing computes token indices this way (flat slot // top_k). The operand's
// magnitude must be known below 2^24 and the divisor a nonzero integer below 2^24 in magnitude;
// other integer and float divisions run on the CPU (floats' floor division rounds as torch's does
// there), and an integer division by zero raises ZeroDivisionError as on the CPU.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "kernels/integer_division.h"
#include "torch_bridge/csrc/ops_support.h"

namespace vtpu::bridge {
namespace {

constexpr int64_t kExact = int64_t{1} << 24;

// The divisor when `other` is an integer constant (a Python number or a 0-d CPU tensor).
std::optional<int64_t> constant_divisor(const at::Tensor& other) {
  if (!is_cpu_scalar(other) || !at::isIntegralType(other.scalar_type(), /*includeBool=*/false)) return std::nullopt;
  return other.item<int64_t>();
}

at::Tensor divide(const char* op, const at::Tensor& self, const at::Tensor& other, bool remainder, const CpuFn& cpu) {
  const auto divisor = constant_divisor(other);
  TORCH_CHECK(!(divisor && *divisor == 0 && at::isIntegralType(self.scalar_type(), true)), "ZeroDivisionError");
  const auto bound = self.scalar_type() == at::kLong && self.device().is_privateuseone() ? int64_bound_of(self) : std::nullopt;
  if (!divisor || !bound || *bound >= kExact || std::abs(*divisor) >= kExact) {
    return run_on_cpu(op, {self, other}, cpu, "operands other than an int64 tensor of known magnitude below 2^24 and an integer constant");
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
at::Tensor& tpu_floor_divide_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  return write_out(out, tpu_floor_divide(self, other));
}
at::Tensor tpu_remainder(const at::Tensor& self, const at::Tensor& other) {
  return divide("remainder", self, other, true, [](const std::vector<at::Tensor>& c) { return at::remainder(c[0], c[1]); });
}
at::Tensor tpu_remainder_scalar(const at::Tensor& self, const at::Scalar& other) {
  return tpu_remainder(self, at::scalar_tensor(other, at::TensorOptions().dtype(other.type())));
}
at::Tensor& tpu_remainder_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  return write_out(out, tpu_remainder(self, other));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("floor_divide", tpu_floor_divide);
  m.impl("floor_divide.Scalar", tpu_floor_divide_scalar);
  m.impl("floor_divide.out", tpu_floor_divide_out);
  m.impl("remainder.Tensor", tpu_remainder);
  m.impl("remainder.Scalar", tpu_remainder_scalar);
  m.impl("remainder.Tensor_out", tpu_remainder_out);
}

}  // namespace vtpu::bridge
