// Views the fusion planner and the lowering read in place (declared in fusion.h): what a
// reshape stands for, and the row stride of a view whose rows are contiguous.
#include <optional>

#include "kernels/graph/fusion.h"

namespace vtpu::kernels {

const Node& view_node(const Graph& g, int v) {
  while (g.node(v).kind == NodeKind::Reshape) v = g.node(v).inputs[0];
  return g.node(v);
}

std::optional<int64_t> view_row_stride(const Node& n) {
  if (n.kind != NodeKind::StridedCopy || n.type.shape.empty()) return std::nullopt;
  const size_t last = n.type.shape.size() - 1;
  if (n.type.shape[last] > 1 && n.strides[last] != 1) return std::nullopt;
  // Outer dims (size-1 ones aside) must step whole rows: each dim's stride is the row stride
  // times the rows the dims inside it span.
  std::optional<int64_t> row_stride;
  int64_t rows_inside = 1;
  for (size_t d = last; d-- > 0;) {
    if (n.type.shape[d] == 1) continue;
    if (!row_stride) row_stride = n.strides[d];
    if (n.strides[d] != *row_stride * rows_inside) return std::nullopt;
    rows_inside *= n.type.shape[d];
  }
  const int64_t stride = row_stride.value_or(n.type.shape[last]);
  if (stride < n.type.shape[last]) return std::nullopt;
  return stride;
}

}  // namespace vtpu::kernels
