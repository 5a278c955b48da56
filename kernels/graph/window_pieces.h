// Streaming kernels over more than one launch can address. A launch sees its buffers through a
// 4 GiB window (isa/address_window.h) and takes its sizes as int32 scalars, so an elementwise op
// over tensors of a few GB (an optimizer's update of a 1 GB embedding in f32 moments, `a + b` of
// two 2.8 GB tensors) cannot be one launch. A kernel that streams its operands' flat data runs
// instead as several launches of the same program, each over a contiguous range of the elements
// and so over a byte range of every buffer: the same reads and writes, once each.
#pragma once

#include <cstdint>
#include <vector>

#include "isa/address_window.h"
#include "kernels/graph/graph.h"
#include "kernels/graph/launch.h"

namespace vtpu::kernels {

// Whether an elementwise group of `nodes` reading `operands` can stream its data flat: every node
// makes as many elements as the last, and every operand has that many or is a single element (no
// dim to broadcast), so element i of each buffer belongs with element i of the others.
bool streams_flat(const Graph& g, const std::vector<int>& nodes, const std::vector<int>& operands);

// A buffer argument of a flat launch: its bytes per element, which a piece takes for its range,
// or 0 for a single-element operand broadcast to all, which every piece binds whole.
struct FlatArg {
  uint64_t element_bytes = 0;
  uint64_t whole_bytes = 0;
};

// The pieces of a flat launch of `elements` on rows of `width` (flat_stream_scalars), or none when
// one launch takes it all. Each piece but the last covers whole rows and starts on a 4 KiB
// boundary of every buffer; each fits the window (`window` bytes: tests shrink it). Throws
// KernelError when not even 4,096 elements do.
std::vector<LaunchPiece> flat_window_pieces(const std::vector<FlatArg>& args, int64_t elements, int64_t width,
                                            uint64_t window = isa::kWindowBytes);

}  // namespace vtpu::kernels
