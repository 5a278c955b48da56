#include "kernels/compose/sort.h"

#include <fmt/format.h>

#include <limits>

#include "kernels/codegen/kernel_error.h"

namespace vtpu::kernels {

SortedRows sort_rows(Graph& g, int x, bool descending, const std::string& label) {
  const auto shape = g.node(x).type.shape;
  if (shape.size() != 2 || g.node(x).type.dtype != DType::F32) throw KernelError("sort: expects f32 [rows, n]");
  const int64_t rows = shape[0], n = shape[1];
  if (rows * n * n > kSortMaxPairs) {
    throw KernelError(fmt::format("sort: {} rows of {} need {} compares, more than {}", rows, n, rows * n * n, kSortMaxPairs));
  }
  const auto nan = [&](int v) { return g.binary(ExprOp::Ne, v, v, label); };
  // a before b: a < b, or b is NaN and a is not (NaN is the largest)
  const auto less = [&](int a, int b) {
    return g.binary(ExprOp::Or, g.binary(ExprOp::Lt, a, b, label),
                    g.binary(ExprOp::And, nan(b), g.unary(ExprOp::Not, nan(a), label), label), label);
  };
  const auto same = [&](int a, int b) {
    return g.binary(ExprOp::Or, g.binary(ExprOp::Eq, a, b, label), g.binary(ExprOp::And, nan(a), nan(b), label), label);
  };
  // [rows, i, j]: x_i down the middle dim, x_j along the last
  const int xi = g.reshape(x, {rows, n, 1}, label), xj = g.reshape(x, {rows, 1, n}, label);
  const int i = g.iota({{n, 1}, DType::I32}, label), j = g.iota({{n}, DType::I32}, label);
  const int outranks = descending ? less(xi, xj) : less(xj, xi);  // x_j goes before x_i
  const int tie_before = g.binary(ExprOp::And, same(xj, xi), g.binary(ExprOp::Lt, j, i, label), label);
  const int before = g.cast(g.binary(ExprOp::Or, outranks, tie_before, label), DType::F32, label);
  const int rank = g.reshape(g.row(RowOp::Sum, before, -1, -1, 1e-5, label), {rows, 1, n}, label);  // of x_i, i along the last dim now
  // [rows, p, i]: position p takes x_i when rank_i == p
  const int p = g.iota({{n, 1}, DType::F32}, label);
  const int takes = g.binary(ExprOp::Eq, rank, p, label);
  const int nowhere = g.full({{1}, DType::F32}, -std::numeric_limits<double>::infinity(), label);
  const int values = g.row(RowOp::Max, g.where(takes, xj, nowhere, label), -1, -1, 1e-5, label);
  const int positions = g.row(RowOp::Max, g.where(takes, g.iota({{n}, DType::F32}, label), g.full({{1}, DType::F32}, -1.0, label), label),
                              -1, -1, 1e-5, label);
  return {values, positions};
}

}  // namespace vtpu::kernels
