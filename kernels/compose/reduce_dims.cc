// See reduce_dims.h. The choices here decide which kernels a reduction costs: a column
// reduction reads x once; a permute first costs a copy of x.
#include "kernels/compose/reduce_dims.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "kernels/codegen/kernel_error.h"
#include "kernels/codegen/vreg_shape.h"

namespace vtpu::kernels {
namespace {

constexpr int64_t kPreferredGroup = 2048;  // elements per row of a split reduction's first pass
constexpr int64_t kMostSlices = 16;         // a middle reduction composed of at most this many slices

ExprOp combining_op(RowOp op) {
  return op == RowOp::Max ? ExprOp::Max : op == RowOp::Min ? ExprOp::Min : ExprOp::Add;
}

// x as [outer, r, inner] reduced over its middle dim by combining its r slices [outer, inner]
// elementwise: each slice is a row-strided view that the elementwise kernel reads in place, so x
// is read once and nothing is transposed (grouped-query attention's key and value gradients sum
// each group's few query heads: a permute moving a dim of 4 last was a transpose of 4-element
// rows, slow on the chip and slower to simulate).
int combine_middle_slices(Graph& g, int x, int64_t outer, int64_t r, int64_t inner, RowOp op) {
  const DType dtype = g.node(x).type.dtype;
  // Sums accumulate in f32 and round once, as a row kernel's (and the CPU's) do.
  const bool widen = (op == RowOp::Sum || op == RowOp::Mean) && dtype != DType::F32;
  const int flat = g.reshape(x, {outer * r * inner});
  int out = -1;
  for (int64_t i = 0; i < r; ++i) {
    int slice = g.strided_copy(flat, {outer, inner}, {r * inner, 1}, i * inner, "reduce_slice");
    if (widen) slice = g.cast(slice, DType::F32, "reduce_slices");
    out = out < 0 ? slice : g.binary(combining_op(op), out, slice, "reduce_slices");
  }
  if (op == RowOp::Mean) out = g.binary_scalar(ExprOp::Mul, out, 1.0 / double(r), false, "reduce_slices");
  return widen ? g.cast(out, dtype, "reduce_slices") : out;
}

// A row longer than a row kernel holds whose length has no divisor to split it by (a prime past
// 65,536): padded with the op's identity to whole groups of kPreferredGroup, each group reduced,
// then the groups' results. A mean is the padded sum scaled by the true count.
int reduce_padded_row(Graph& g, int src, int64_t kept_numel, int64_t reduced_numel, RowOp op,
                      const std::vector<int64_t>& out_shape) {
  const int64_t groups = (reduced_numel + kPreferredGroup - 1) / kPreferredGroup;
  if (groups > kMaxRowCols) {
    throw KernelError(fmt::format("a reduction over {} elements (more than {} rows of {})", reduced_numel, kMaxRowCols,
                                  kPreferredGroup));
  }
  const double inf = std::numeric_limits<double>::infinity();
  const double identity = op == RowOp::Max ? -inf : op == RowOp::Min ? inf : op == RowOp::Prod ? 1.0 : 0.0;
  const RowOp pass = op == RowOp::Mean ? RowOp::Sum : op;
  const int rows = g.reshape(src, {kept_numel, reduced_numel});
  const int padded = g.pad(rows, 1, 0, groups * kPreferredGroup - reduced_numel, identity, "reduce_pad");
  const int partial = g.row(pass, g.reshape(padded, {kept_numel * groups, kPreferredGroup}));
  int reduced = g.row(pass, g.reshape(partial, {kept_numel, groups}));
  if (op == RowOp::Mean) reduced = g.binary_scalar(ExprOp::Mul, reduced, 1.0 / double(reduced_numel), false, "mean");
  return g.reshape(reduced, out_shape);
}

// Var over a row longer than a row kernel holds, in the row kernel's two passes: the mean, then the
// sum of squared deviations from it, each a long reduction, over n - correction; in f32.
int long_row_variance(Graph& g, int src, int64_t kept_numel, int64_t reduced_numel, int64_t correction,
                      const std::vector<int64_t>& out_shape) {
  const DType dtype = g.node(src).type.dtype;
  int x = g.reshape(src, {kept_numel, reduced_numel});
  if (dtype != DType::F32) x = g.cast(x, DType::F32, "var");
  const int mean = g.reshape(reduce_dims(g, x, {1}, RowOp::Mean), {kept_numel, 1});
  const int deviation = g.binary(ExprOp::Sub, x, mean, "var");
  const int squares = reduce_dims(g, g.binary(ExprOp::Mul, deviation, deviation, "var"), {1}, RowOp::Sum);
  int var = g.binary_scalar(ExprOp::Div, squares, double(reduced_numel - correction), false, "var");
  if (dtype != DType::F32) var = g.cast(var, dtype, "var");
  return g.reshape(var, out_shape);
}

}  // namespace

int reduce_dims(Graph& g, int v, const std::vector<int64_t>& dims, RowOp op, int64_t correction) {
  const auto shape = g.node(v).type.shape;
  std::vector<int64_t> kept, order;
  int64_t kept_numel = 1, reduced_numel = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (std::find(dims.begin(), dims.end(), int64_t(i)) == dims.end()) {
      kept.push_back(shape[i]);
      order.push_back(static_cast<int64_t>(i));
      kept_numel *= shape[i];
    } else {
      reduced_numel *= shape[i];
    }
  }
  for (int64_t d : dims) order.push_back(d);
  // Over leading dims (a bias's gradient: a sum over tokens) and at least a vreg wide: one column
  // reduction, no permute first.
  bool leading = !kept.empty();
  for (size_t i = 0; i < dims.size(); ++i) leading &= std::find(dims.begin(), dims.end(), int64_t(i)) != dims.end();
  const bool column_op = op == RowOp::Sum || op == RowOp::Mean || op == RowOp::Max ||
                         op == RowOp::Min;
  const DType dtype = g.node(v).type.dtype;
  if (leading && column_op && kept_numel >= kLanes && dtype_is_float(dtype)) {
    return g.reshape(g.column_reduce(op, g.reshape(v, {reduced_numel, kept_numel})), kept);
  }
  // Over one run of middle dims, with a vreg-wide run of kept dims after it: slices combined.
  const int64_t first = dims.empty() ? 0 : *std::min_element(dims.begin(), dims.end());
  const int64_t last = dims.empty() ? 0 : *std::max_element(dims.begin(), dims.end());
  int64_t inner = 1;
  for (size_t i = static_cast<size_t>(last) + 1; i < shape.size(); ++i) inner *= shape[i];
  const bool one_run = !dims.empty() && last - first + 1 == static_cast<int64_t>(dims.size());
  if (one_run && column_op && inner >= kLanes && reduced_numel > 1 && reduced_numel <= kMostSlices && dtype_is_float(dtype)) {
    return g.reshape(combine_middle_slices(g, v, kept_numel / inner, reduced_numel, inner, op), kept);
  }
  bool already_last = true;
  for (size_t i = 0; i < order.size(); ++i) already_last &= order[i] == int64_t(i);
  const int src = already_last ? v : g.permute(v, order, "permute_for_reduction");
  const std::vector<int64_t> out_shape = kept.empty() ? std::vector<int64_t>{} : kept;
  if (reduced_numel <= kMaxRowCols) {
    const int reduced = g.row(op, g.reshape(src, {kept_numel, reduced_numel}), -1, -1, 1e-5, "", correction);
    return g.reshape(reduced, out_shape);
  }
  if (op == RowOp::Var && dtype_is_float(dtype)) return long_row_variance(g, src, kept_numel, reduced_numel, correction, out_shape);
  // Longer than a row kernel holds: reduce [a, b] groups twice (sum, mean, max and min compose
  // over equal groups). Checked here, per op, so an extent that cannot be split falls back now
  // instead of failing at the flush.
  const bool composes = op == RowOp::Sum || op == RowOp::Mean || op == RowOp::Max ||
                        op == RowOp::Min || op == RowOp::Prod;
  // Groups of about 2048 first: the first pass then has many rows, so its blocks pipeline (a few
  // 64K-element rows are one block, with nothing to overlap its load), and the second is short.
  const auto splits = [&](int64_t b) { return reduced_numel % b == 0 && reduced_numel / b <= kMaxRowCols; };
  int64_t b = kPreferredGroup;
  while (b <= kMaxRowCols && !splits(b)) ++b;
  if (b > kMaxRowCols) {
    b = std::min(reduced_numel, kMaxRowCols);
    while (b > 1 && !splits(b)) --b;
  }
  if (composes && b <= 1 && dtype_is_float(dtype)) return reduce_padded_row(g, src, kept_numel, reduced_numel, op, out_shape);
  if (!composes || b <= 1) {
    throw KernelError(fmt::format("a reduction over {} elements (more than {}{}", reduced_numel, kMaxRowCols,
                                  composes ? " with no divisor to split them by)" : " and not a sum, mean, max, min or product)"));
  }
  const int64_t a = reduced_numel / b;
  const int partial = g.row(op, g.reshape(src, {kept_numel * a, b}), -1, -1, 1e-5, "", correction);
  const int reduced = g.row(op, g.reshape(partial, {kept_numel, a}), -1, -1, 1e-5, "", correction);
  return g.reshape(reduced, out_shape);
}

}  // namespace vtpu::kernels
