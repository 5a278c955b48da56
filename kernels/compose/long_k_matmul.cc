// See long_k_matmul.h.
#include "kernels/compose/long_k_matmul.h"

#include <algorithm>
#include <bit>
#include <vector>

#include "kernels/generators/matmul.h"

namespace vtpu::kernels {
namespace {

int64_t power_of_two_at_least(int64_t v) { return int64_t(std::bit_ceil(uint64_t(std::max<int64_t>(v, 1)))); }

}  // namespace

// See long_k_matmul.h.
int k_slice(Graph& g, int x, bool along_last, int64_t k0, int64_t len, const std::string& label) {
  const auto shape = g.node(x).type.shape;
  const size_t rank = shape.size(), k_dim = along_last ? rank - 1 : rank - 2;
  std::vector<int64_t> strides(rank, 1);
  for (size_t d = rank - 1; d > 0; --d) strides[d - 1] = strides[d] * shape[d];
  auto sizes = shape;
  sizes[k_dim] = len;
  return g.strided_copy(x, sizes, strides, k0 * strides[k_dim], label + "_k_slice");
}

int64_t one_launch_k(const Graph& g, int a, int b, bool transpose_b, int passes, const sim::ChipConfig& chip,
                     bool transpose_a) {
  const auto& at = g.node(a).type;
  const auto& bt = g.node(b).type;
  const size_t rank = at.shape.size();
  const int64_t k = transpose_a ? at.shape[rank - 2] : at.shape.back();
  // Most matmuls, at no cost: the smallest blocks spend under 8 KiB of VMEM per K element (A's and
  // B's panels, B's three bf16 parts, its staging and a transposed A's, at D = 256) and well
  // under 1 MiB on the rest.
  if (uint64_t(k) * 8192 + (uint64_t{1} << 20) <= chip.kernel_vmem_bytes()) return k;
  MatmulSpec spec;
  spec.k = k;
  spec.b_shared = bt.shape.size() == 2;
  const int64_t m = transpose_a ? at.shape.back() : at.shape[rank - 2];
  spec.m = power_of_two_at_least(spec.b_shared ? at.numel() / std::max<int64_t>(k, 1) : m);
  spec.n = power_of_two_at_least(std::max<int64_t>(transpose_b ? bt.shape[bt.shape.size() - 2] : bt.shape.back(), 128));
  spec.batch = spec.b_shared ? 1 : at.numel() / std::max<int64_t>(m * k, 1);
  spec.a_dtype = at.dtype;
  spec.b_dtype = bt.dtype;
  spec.a_transposed = transpose_a;
  spec.b_transposed = transpose_b;
  const bool f16 = at.dtype == DType::F16 || bt.dtype == DType::F16;
  spec.passes = f16 ? 6 : (at.dtype == DType::F32 || bt.dtype == DType::F32) ? passes : 1;
  spec.epilogue_inputs = {{DType::F32, Layout::Full}};  // room for a fused f32 operand (a bias, a partial sum)
  return matmul_max_k(spec, chip, /*full_size_blocks=*/true);
}

int matmul_with_long_k(Graph& g, int a, int b, bool transpose_b, int passes, const std::string& label,
                       const sim::ChipConfig* chip, bool transpose_a, bool f32_result) {
  const auto& at = g.node(a).type;
  const int64_t k = transpose_a ? at.shape[at.shape.size() - 2] : at.shape.back();
  const int64_t most = chip && k > 0 ? one_launch_k(g, a, b, transpose_b, passes, *chip, transpose_a) : k;
  if (most <= 0 || most >= k) return g.matmul(a, b, transpose_b, passes, label, transpose_a, f32_result);
  const DType a_type = at.dtype, b_type = g.node(b).type.dtype;
  const int64_t pieces = (k + most - 1) / most, step = (k + pieces - 1) / pieces;
  int sum = -1;
  for (int64_t k0 = 0; k0 < k; k0 += step) {
    const int64_t len = std::min(step, k - k0);
    const int part = g.matmul(k_slice(g, a, !transpose_a, k0, len, label), k_slice(g, b, transpose_b, k0, len, label),
                              transpose_b, passes, label, transpose_a, /*f32_result=*/true);
    sum = sum < 0 ? part : g.binary(ExprOp::Add, sum, part, label + "_k_sum");
  }
  // Graph::matmul's result dtype: its operands' when they agree and are 16-bit, else f32.
  return !f32_result && a_type == b_type && dtype_is_float(a_type) && a_type != DType::F32 ? g.cast(sum, a_type, label) : sum;
}

}  // namespace vtpu::kernels
