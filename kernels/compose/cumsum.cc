#include "kernels/compose/cumsum.h"

#include <fmt/format.h>

#include <functional>
#include <numeric>
#include <vector>

#include "kernels/codegen/kernel_error.h"

namespace vtpu::kernels {
namespace {

// scan([rows, n]) applied along `dim`: the scanned dim moved last and flattened to rows, and back.
int along_last(Graph& g, int x, int64_t dim, const char* label, const std::function<int(int flat)>& scan) {
  const auto shape = g.node(x).type.shape;
  const int64_t rank = static_cast<int64_t>(shape.size());
  if (dim < 0 || dim >= rank) throw KernelError(fmt::format("{}: dim {} of a {}-d tensor", label, dim, rank));
  const int64_t n = shape[dim];
  std::vector<int64_t> order(rank);
  std::iota(order.begin(), order.end(), 0);
  order.erase(order.begin() + dim);
  order.push_back(dim);
  const int last = dim == rank - 1 ? x : g.permute(x, order, label);
  const int64_t rows = n > 0 ? g.node(x).type.numel() / n : 0;
  std::vector<int64_t> moved;
  for (int64_t d : order) moved.push_back(shape[d]);
  const int scanned = g.reshape(scan(g.reshape(last, {rows, n}, label)), moved, label);
  if (dim == rank - 1) return scanned;
  // back: result dim d is moved dim inverse[d]
  std::vector<int64_t> inverse(rank);
  for (int64_t i = 0; i < rank; ++i) inverse[order[i]] = i;
  return g.permute(scanned, inverse, label);
}

// U [n, n], U[k][j] = (k <= j), in bf16 (exact)
int upper_ones(Graph& g, int64_t n, const char* label) {
  const int k = g.iota({{n, 1}, DType::I32}, label), j = g.iota({{n}, DType::I32}, label);
  return g.cast(g.binary(ExprOp::Le, k, j, label), DType::BF16, label);
}

void check_byte_scan_length(Graph& g, int x, int64_t dim, const char* label) {
  const auto& shape = g.node(x).type.shape;
  if (dim >= 0 && dim < static_cast<int64_t>(shape.size()) && shape[dim] > kMaxExactByteSum) {
    throw KernelError(fmt::format("{}: {} elements along dim {}; byte sums stay exact in f32 up to {}", label, shape[dim], dim,
                                  kMaxExactByteSum));
  }
}

}  // namespace

int cumsum(Graph& g, int x, int64_t dim, int passes) {
  return along_last(g, x, dim, "cumsum", [&](int flat) {
    const int n = static_cast<int>(g.node(flat).type.shape[1]);
    const int f32 = g.node(flat).type.dtype == DType::F32 ? flat : g.cast(flat, DType::F32, "cumsum");
    return g.matmul(f32, upper_ones(g, n, "cumsum"), false, passes, "cumsum");
  });
}

int cumsum_int32(Graph& g, int x, int64_t dim) {
  if (g.node(x).type.dtype != DType::I32) {
    throw KernelError(fmt::format("cumsum_int32: takes int32 values (got {})", to_string(g.node(x).type)));
  }
  check_byte_scan_length(g, x, dim, "cumsum_int32");
  return along_last(g, x, dim, "cumsum", [&](int flat) {
    const int upper = upper_ones(g, g.node(flat).type.shape[1], "cumsum");
    int sum = -1;
    for (int b = 0; b < 4; ++b) {
      // one bf16 pass: a byte and U's ones are exact in bf16, their sums exact in f32
      const int digits = g.cast(g.byte_of(flat, b, "cumsum"), DType::F32, "cumsum");
      const int scanned = g.cast(g.matmul(digits, upper, false, 1, "cumsum"), DType::I32, "cumsum");
      // the bytes' weights 2^(8b), multiplied and added in wrapping int32 as torch's int32 sum wraps
      const int weighted = b == 0 ? scanned : g.binary_scalar(ExprOp::Mul, scanned, double(int64_t{1} << (8 * b)), false, "cumsum");
      sum = b == 0 ? weighted : g.binary(ExprOp::Add, sum, weighted, "cumsum");
    }
    return sum;
  });
}

int cumsum_int64(Graph& g, int pairs, int64_t dim) {
  const Int64Words x = split_words(g, pairs, "cumsum");
  check_byte_scan_length(g, x.lo, dim, "cumsum_int64");
  const Int64Words sums = sum_int64_bytes(g, x, [&](int plane) {
    return along_last(g, plane, dim, "cumsum", [&](int flat) {
      // one bf16 pass: a byte and U's ones are exact in bf16, their sums exact in f32
      return g.matmul(flat, upper_ones(g, g.node(flat).type.shape[1], "cumsum"), false, 1, "cumsum");
    });
  }, "cumsum");
  return join_words(g, sums, "cumsum");
}

}  // namespace vtpu::kernels
