// Stream compaction without data-dependent control flow: the flat positions of a mask's true
// elements, in order (what torch.nonzero, masked_select and x[mask] need once the count is known
// on the host). Each true element's slot is the number of true elements before it, an exclusive
// scan done as matmul scans (kernels/compose/cumsum.h) over the mask cut into rows of 128, the rows'
// totals scanned the same way, level by level; a scatter-add of positions into the slots (false
// elements into one spare slot) then writes each slot exactly once.
#pragma once

#include <cstdint>

#include "kernels/graph/graph.h"

namespace vtpu::kernels {

// The largest mask true_positions takes: positions and counts stay exact in f32.
constexpr int64_t kCompactionMaxElements = (int64_t{1} << 24) - 1;

// f32 [count]: the flat positions of the true elements of `mask` (bool, any shape, n elements),
// in order; `count` is how many there are (the caller read it). Exact: n < 2^24.
int true_positions(Graph& g, int mask, int64_t count, const std::string& label = "nonzero");

// f32 [size]: the flat positions of the first `size` true elements of `mask`, in order, and -1
// where there are fewer (torch.nonzero_static's rows, without reading the count). Exact: n < 2^24.
int first_true_positions(Graph& g, int mask, int64_t size, const std::string& label = "nonzero_static");

}  // namespace vtpu::kernels
