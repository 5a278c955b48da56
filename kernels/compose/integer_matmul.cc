// See integer_matmul.h.
#include "kernels/compose/integer_matmul.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "kernels/codegen/kernel_error.h"
#include "kernels/compose/long_k_matmul.h"

namespace vtpu::kernels {
namespace {

constexpr int64_t kF32Exact = int64_t{1} << 24;

// One exact product of bf16 planes whose sums stay below 2^24 (the caller's K slice), as int32.
struct PlanePair {
  int a, b;
  int shift;  // bytes: the product weighs 2^(8 shift)
};

}  // namespace

int integer_matmul(Graph& g, int a, int b, int64_t bound, const std::string& label) {
  if (g.node(a).type.dtype != DType::I32 || g.node(b).type.dtype != DType::I32) {
    throw KernelError(fmt::format("{}: takes int32 operands, not {} and {}", label, to_string(g.node(a).type), to_string(g.node(b).type)));
  }
  const int64_t k = g.node(a).type.shape.back();
  if (k == 0) {  // an empty sum
    auto shape = g.node(a).type.shape;
    shape.back() = g.node(b).type.shape.back();
    return g.full({shape, DType::I32}, 0, label);
  }
  const auto bf16 = [&](int x) { return g.cast(x, DType::BF16, label); };
  std::vector<PlanePair> pairs;
  int64_t step;
  if (bound <= kMxuExactInteger) {
    pairs.push_back({bf16(a), bf16(b), 0});
    step = std::max<int64_t>(kF32Exact / std::max<int64_t>(bound * bound, 1), 1);
  } else {
    std::vector<int> a_bytes, b_bytes;
    for (int p = 0; p < 4; ++p) a_bytes.push_back(bf16(g.byte_of(a, p, label))), b_bytes.push_back(bf16(g.byte_of(b, p, label)));
    for (int p = 0; p < 4; ++p) {
      for (int q = 0; p + q < 4; ++q) pairs.push_back({a_bytes[p], b_bytes[q], p + q});
    }
    step = kF32Exact / (255 * 255);  // 258: K * 255^2 < 2^24
  }
  int sum = -1;
  for (int64_t k0 = 0; k0 < k; k0 += step) {
    const int64_t len = std::min(step, k - k0);
    for (const PlanePair& pair : pairs) {
      const int x = len == k ? pair.a : k_slice(g, pair.a, true, k0, len, label);
      const int y = len == k ? pair.b : k_slice(g, pair.b, false, k0, len, label);
      int product = g.cast(g.matmul(x, y, false, 1, label, false, /*f32_result=*/true), DType::I32, label);
      if (pair.shift > 0) product = g.binary_scalar(ExprOp::Mul, product, double(int64_t{1} << (8 * pair.shift)), false, label);
      sum = sum < 0 ? product : g.binary(ExprOp::Add, sum, product, label);
    }
  }
  return sum;
}

}  // namespace vtpu::kernels
