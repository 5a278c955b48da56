// Reductions over any set of dims, built from the row and column-reduction kernels: the graph
// helper behind torch's sum/mean/amax/var over dims, bias gradients and the convolution's weight
// gradient.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/graph/graph.h"

namespace vtpu::kernels {

// op (sum, mean, max, min, var) of value `v` over `dims` (sorted, non-negative): leading dims go to
// one column reduction when at least a vreg of columns stays; otherwise the reduced dims are
// permuted last by a strided copy when they are not already, flattened, and reduced by row
// kernels (twice, over equal groups, when longer than one row kernel holds). The result has the
// kept dims' shape. Throws KernelError when the reduced extent cannot be split.
int reduce_dims(Graph& g, int v, const std::vector<int64_t>& dims, RowOp op, int64_t correction = 1);

}  // namespace vtpu::kernels
