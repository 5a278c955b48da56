// Integer powers on the chip, exact as the CPU's (kernels/compose/integer_power.h): int32, int8 and
// uint8 computed in int32 (8-bit results wrapped to their byte, as the CPU's arithmetic in those
// types wraps), and int64 of known magnitude where the result stays below 2^31 (|a|^b for the
// largest exponent). A negative constant exponent is refused with torch's message. Others run on
// the CPU, named.
#include "torch_bridge/csrc/aten/integer_power.h"

#include <bit>
#include <cmath>

#include "kernels/compose/integer_division.h"  // kAnyInt32
#include "kernels/compose/integer_power.h"
#include "kernels/compose/integer_wrap.h"
#include "torch_bridge/csrc/record/cpu_scalar.h"
#include "torch_bridge/csrc/record/recorder.h"

namespace vtpu::bridge {
namespace {

using kernels::DType;
using kernels::Graph;


std::optional<int64_t> constant_exponent(const at::Tensor& other) {
  if (!is_cpu_scalar(other) || !at::isIntegralType(other.scalar_type(), /*includeBool=*/true)) return std::nullopt;
  return other.item<int64_t>();
}

int as_i32(Graph& g, int x) { return g.node(x).type.dtype == DType::I32 ? x : g.cast(x, DType::I32, "pow"); }

// How many bits of an exponent tensor of `dtype` can be set in a non-negative exponent.
int exponent_bits(c10::ScalarType dtype) {
  switch (dtype) {
    case at::kBool: return 1;
    case at::kByte: return 8;
    case at::kChar: return 7;
    default: return 31;
  }
}

at::Tensor power_chip_integers(const at::Tensor& self, const at::Tensor& other, std::optional<int64_t> exponent, c10::ScalarType dtype,
                               const CpuFn& cpu) {
  const auto shape = at::infer_size(self.sizes(), other.sizes());
  const auto [a_in, b_in] = with_scalar_uploaded(self, other, dtype);
  std::vector<at::Tensor> inputs{a_in};
  if (!exponent) inputs.push_back(b_in);
  const int bits = exponent_bits(other.scalar_type());
  return record("pow", inputs, dtype, [&](Graph& g, const std::vector<int>& v) {
    const int a = as_i32(g, v[0]);
    int r = exponent ? kernels::integer_power_by(g, a, *exponent, "pow") : kernels::integer_power(g, a, as_i32(g, v[1]), bits, "pow");
    if (dtype != at::kInt) r = kernels::wrap_to_byte(g, r, dtype == at::kChar, "pow");
    return g.cast(r, to_kernel_dtype(dtype), "pow");
    // the CPU gets both operands, the constant too
  }, [cpu, self, other](const std::vector<at::Tensor>&) { return cpu({self.cpu(), other.cpu()}); }).view(shape);
}

// int64 operands of known magnitude (the exponent a constant or an int64 tensor) whose power stays
// below 2^31; nullopt otherwise.
std::optional<at::Tensor> power_int64(const at::Tensor& self, const at::Tensor& other, std::optional<int64_t> exponent, const CpuFn& cpu) {
  if (!self.device().is_privateuseone() || self.scalar_type() != at::kLong) return std::nullopt;
  const auto a_bound = int64_bound_of(self);
  const bool tensor_exponent = !exponent && other.device().is_privateuseone() && other.scalar_type() == at::kLong;
  const auto b_bound = exponent ? std::optional(*exponent) : tensor_exponent ? int64_bound_of(other) : std::nullopt;
  if (!a_bound || !b_bound || *a_bound >= kernels::kAnyInt32 || *b_bound >= kernels::kAnyInt32) return std::nullopt;
  const double largest = *a_bound <= 1 ? 1.0 : std::pow(double(*a_bound), double(*b_bound));
  if (!(largest < double(kernels::kAnyInt32))) return std::nullopt;
  const auto shape = at::infer_size(self.sizes(), other.sizes());
  const auto a_shape = self.sizes().vec(), b_shape = other.sizes().vec();
  std::vector<at::Tensor> inputs{index_words(self)};
  if (tensor_exponent) inputs.push_back(index_words(other));
  const int bits = std::max(1, int(std::bit_width(uint64_t(*b_bound))));
  const at::Tensor words = record("pow", inputs, at::kInt, [&](Graph& g, const std::vector<int>& v) {
    const int a = g.reshape(g.int64_narrow(v[0], *a_bound + 1, "pow"), a_shape, "pow");
    if (exponent) return int64_words(g, kernels::integer_power_by(g, a, *exponent, "pow"));
    const int b = g.reshape(g.int64_narrow(v[1], *b_bound + 1, "pow"), b_shape, "pow");
    return int64_words(g, kernels::integer_power(g, a, b, bits, "pow"));
  }, [cpu, self, other](const std::vector<at::Tensor>&) { return cpu({self.cpu(), other.is_cpu() ? other : other.cpu()}); });
  return as_int64(words, int64_t(largest)).view(shape);
}

}  // namespace

at::Tensor integer_pow(const at::Tensor& self, const at::Tensor& other, const CpuFn& cpu) {
  const auto dtype = at::result_type(self, other);
  const auto exponent = constant_exponent(other);
  TORCH_CHECK(!(exponent && *exponent < 0), "Integers to negative integer powers are not allowed.");
  if (dtype == at::kInt || dtype == at::kChar || dtype == at::kByte) return power_chip_integers(self, other, exponent, dtype, cpu);
  if (dtype == at::kLong) {
    if (auto out = power_int64(self, other, exponent, cpu)) return *out;
  }
  return run_on_cpu("pow", {self, other}, cpu,
                    "integer powers other than of int32, int8 or uint8, or of int64 whose result is known below 2^31");
}

}  // namespace vtpu::bridge
