// See integer_accumulate.h.
#include "torch_bridge/csrc/aten/integer_accumulate.h"

#include "kernels/compose/integer_division.h"  // kAnyInt32
#include "torch_bridge/csrc/record/op_support.h"

namespace vtpu::bridge {
namespace {

constexpr int64_t kF32Exact = int64_t{1} << 24;

// The largest |value| of an integer tensor of this dtype, where it is known.
std::optional<int64_t> magnitude(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kBool: return 1;
    case at::kByte: return 255;
    case at::kChar: return 128;
    case at::kLong: return t.device().is_privateuseone() ? int64_bound_of(t) : std::nullopt;
    default: return std::nullopt;
  }
}

bool is_chip_integer(c10::ScalarType t) { return t == at::kInt || t == at::kChar || t == at::kByte; }

// An int32 result back in self's dtype: 8-bit types keep the low byte, as their arithmetic wraps.
at::Tensor in_dtype(const at::Tensor& x, c10::ScalarType dtype) {
  if (dtype == at::kInt) return x;
  const at::Tensor byte = at::bitwise_and(x, 255);
  return (dtype == at::kChar ? at::sub(at::bitwise_xor(byte, 128), 128) : byte).to(dtype);
}

}  // namespace

std::optional<at::Tensor> integer_accumulate(const at::Tensor& self, const at::Tensor& src,
                                             const std::function<at::Tensor(const at::Tensor&)>& scatter) {
  const auto dtype = self.scalar_type();
  if (!self.device().is_privateuseone() || !at::isIntegralType(src.scalar_type(), /*includeBool=*/true)) return std::nullopt;
  const int64_t n = std::max<int64_t>(src.numel(), 1);
  const auto src_bound = magnitude(src);
  const bool small = src_bound && double(*src_bound) * double(n) < double(kF32Exact);
  std::optional<int64_t> result_bound;
  if (dtype == at::kLong) {  // int64: on its int32 form, where every sum stays within int32
    const auto self_bound = magnitude(self);
    if (!self_bound || !src_bound || double(*self_bound) + double(*src_bound) * double(n) >= double(kernels::kAnyInt32)) return std::nullopt;
    result_bound = *self_bound + *src_bound * n;
  } else if (!is_chip_integer(dtype) || (!small && n > kF32Exact / 255)) {
    return std::nullopt;
  }
  const at::Tensor src32 = src.to(src.device(), at::kInt);
  at::Tensor sums;
  if (small) {
    sums = scatter(src32.to(at::kFloat)).to(at::kInt);
  } else {
    for (int b = 0; b < 4; ++b) {
      const at::Tensor plane = at::bitwise_and(at::bitwise_right_shift(src32, 8 * b), 255).to(at::kFloat);
      const at::Tensor weighed = at::mul(scatter(plane).to(at::kInt), int64_t{1} << (8 * b));  // wraps, as int32 sums do
      sums = b == 0 ? weighed : at::add(sums, weighed);
    }
  }
  const at::Tensor total = at::add(self.to(at::kInt), sums);
  if (dtype != at::kLong) return in_dtype(total, dtype);
  const at::Tensor out = total.to(at::kLong);
  set_int64_bound(out, result_bound);
  return out;
}

}  // namespace vtpu::bridge
