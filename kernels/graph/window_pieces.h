// Streaming kernels over more than one launch can address. A launch sees its buffers through a
// 4 GiB window (isa/address_window.h) and takes its sizes as int32 scalars, so an elementwise op
// over tensors of a few GB (an optimizer's update of a 1 GB embedding in f32 moments, `a + b` of
// two 2.8 GB tensors) or a row reduction over 4 GB of f32 logits cannot be one launch. A kernel
// that streams its operands runs instead as several launches of the same program, each over a
// contiguous range of the work (elements of flat data, or rows) and so over a byte range of every
// buffer: the same reads and writes, once each.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "isa/address_window.h"
#include "kernels/codegen/operand.h"
#include "kernels/graph/graph.h"
#include "kernels/graph/launch.h"

namespace vtpu::kernels {

// Whether an elementwise group of `nodes` reading `operands` can stream its data flat: every node
// makes as many elements as the last, and every operand has that many or is a single element (no
// dim to broadcast), so element i of each buffer belongs with element i of the others.
bool streams_flat(const Graph& g, const std::vector<int>& nodes, const std::vector<int>& operands);

// A buffer argument of a launch split into ranges of its work units (elements or rows): the bytes
// a unit takes of it, which a piece takes for its range, or 0 for an operand every unit reads
// whole (a one-element scalar, a row kernel's weight), which every piece binds in full.
struct RangedArg {
  uint64_t unit_bytes = 0;
  uint64_t whole_bytes = 0;
};

// The pieces of a launch over `units` work units, or none when one launch takes them all: at
// most `max_units` each, every piece but the last a multiple of `step` units, each inside a
// `window`-byte address window (tests shrink it). `scalars(n)` gives the launch scalars of n
// units. Throws KernelError when not even one step fits.
std::vector<LaunchPiece> window_pieces(const std::vector<RangedArg>& args, int64_t units, int64_t step, int64_t max_units,
                                       const std::function<std::vector<int32_t>(int64_t)>& scalars,
                                       uint64_t window = isa::kWindowBytes);

// A flat stream of `elements` on rows of `width` (flat_stream_scalars): pieces of whole rows, at
// most 2^31 - 1 elements each.
std::vector<LaunchPiece> flat_window_pieces(const std::vector<RangedArg>& args, int64_t elements, int64_t width,
                                            uint64_t window = isa::kWindowBytes);

// A streaming launch over rows (a row kernel, or an elementwise one that broadcasts) over more
// than one launch addresses (4 GB of f32 logits), as pieces of rows; none when one launch takes
// them, or when an operand repeats with a period or is read strided, which no row range serves.
// `args` are the launch's buffers: the operands (with `inputs`' layouts), then any read whole (a
// norm's weight and bias), then `outputs` results, each a whole number of elements per row.
// Pieces stay under the largest power of two of rows whose program, `program_cols` wide, one
// launch counts, so the program generated for the first piece serves them all.
std::vector<LaunchPiece> row_window_pieces(const Graph& g, const std::vector<int>& args, const std::vector<Operand>& inputs,
                                           size_t outputs, int64_t rows, int64_t cols, int64_t program_cols,
                                           uint64_t window = isa::kWindowBytes);

}  // namespace vtpu::kernels
