// How a broadcast operand of a graph node streams through a kernel: the operand Layout a shape
// takes against the output's [rows, cols] grid. The graph asks it to decide when a broadcast
// needs a materialising copy; the fusion planner asks it to decide what may join a group.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/codegen/operand.h"

namespace vtpu::kernels {

// How a tensor of `shape` is read when broadcast to `out` flattened to [rows, cols]; throws
// KernelError when it is none of the layouts a kernel can stream.
Layout broadcast_layout(const std::vector<int64_t>& shape, const std::vector<int64_t>& out);
// [rows, cols] of a shape: the last dim is cols, the rest multiply into rows.
std::pair<int64_t, int64_t> rows_cols(const std::vector<int64_t>& shape);

}  // namespace vtpu::kernels
