#include "kernels/cumsum.h"

#include <numeric>
#include <vector>

#include "kernels/asm_writer.h"

namespace vtpu::kernels {

int cumsum(Graph& g, int x, int64_t dim, int passes) {
  const auto shape = g.node(x).type.shape;
  const int64_t rank = static_cast<int64_t>(shape.size());
  if (dim < 0 || dim >= rank) throw KernelError(fmt::format("cumsum: dim {} of a {}-d tensor", dim, rank));
  const int64_t n = shape[dim];
  // the scanned dim last
  std::vector<int64_t> order(rank);
  std::iota(order.begin(), order.end(), 0);
  order.erase(order.begin() + dim);
  order.push_back(dim);
  const int last = dim == rank - 1 ? x : g.permute(x, order, "cumsum");
  const int64_t rows = n > 0 ? g.node(x).type.numel() / n : 0;
  const int flat = g.reshape(g.node(last).type.dtype == DType::F32 ? last : g.cast(last, DType::F32), {rows, n}, "cumsum");
  const int k = g.iota({{n, 1}, DType::I32}, "cumsum"), j = g.iota({{n}, DType::I32}, "cumsum");
  const int upper = g.cast(g.binary(ExprOp::Le, k, j, "cumsum"), DType::BF16, "cumsum");
  int scanned = g.matmul(flat, upper, false, passes, "cumsum");
  std::vector<int64_t> moved;
  for (int64_t d : order) moved.push_back(shape[d]);
  scanned = g.reshape(scanned, moved, "cumsum");
  if (dim == rank - 1) return scanned;
  // back: result dim d is moved dim inverse[d]
  std::vector<int64_t> inverse(rank);
  for (int64_t i = 0; i < rank; ++i) inverse[order[i]] = i;
  return g.permute(scanned, inverse, "cumsum");
}

}  // namespace vtpu::kernels
