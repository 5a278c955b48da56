#include "kernels/graph/window_pieces.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>

#include "kernels/codegen/kernel_error.h"
#include "kernels/codegen/operand.h"
#include "kernels/codegen/vreg_shape.h"

namespace vtpu::kernels {

bool streams_flat(const Graph& g, const std::vector<int>& nodes, const std::vector<int>& operands) {
  if (nodes.empty()) return false;
  const int64_t numel = g.node(nodes.back()).type.numel();
  for (int n : nodes) {
    if (g.node(n).type.numel() != numel) return false;
  }
  for (int v : operands) {
    const int64_t n = g.node(v).type.numel();
    if (n != numel && n != 1) return false;
  }
  return true;
}

namespace {

std::vector<uint64_t> buffer_sizes(const std::vector<RangedArg>& args, int64_t units) {
  std::vector<uint64_t> bytes;
  for (const RangedArg& a : args) bytes.push_back(a.unit_bytes ? a.unit_bytes * uint64_t(units) : a.whole_bytes);
  return bytes;
}

}  // namespace

std::vector<LaunchPiece> window_pieces(const std::vector<RangedArg>& args, int64_t units, int64_t step, int64_t max_units,
                                       const std::function<std::vector<int32_t>(int64_t)>& scalars, uint64_t window) {
  if (units <= max_units && isa::window_fits(buffer_sizes(args, units), window)) return {};
  uint64_t per_unit = 0, whole = 0;
  for (const RangedArg& a : args) {
    if (a.unit_bytes) {
      per_unit += a.unit_bytes;
    } else {
      whole += a.whole_bytes;
    }
  }
  // What the window keeps for itself: its first base, and a guard gap plus alignment per buffer
  // (isa::next_window_base); the rest holds one piece of every ranged buffer.
  const uint64_t reserved = isa::kWindowFirstBase + args.size() * (isa::kWindowGuardBytes + 0x1000) + whole;
  int64_t piece = 0;
  if (per_unit > 0 && reserved < window) {
    piece = std::min<int64_t>(max_units, int64_t((window - 1 - reserved) / per_unit));
    piece -= piece % step;
  }
  if (piece < step || !isa::window_fits(buffer_sizes(args, piece), window)) {
    throw KernelError(fmt::format("a launch over {} units of {} bytes does not fit a launch's {} byte address window "
                                  "even in pieces", units, per_unit, window));
  }
  std::vector<LaunchPiece> pieces;
  for (int64_t start = 0; start < units; start += piece) {
    const int64_t n = std::min(piece, units - start);
    LaunchPiece p;
    for (const RangedArg& a : args) {
      p.ranges.push_back(a.unit_bytes ? LaunchPiece::Range{a.unit_bytes * uint64_t(start), a.unit_bytes * uint64_t(n)}
                                      : LaunchPiece::Range{0, a.whole_bytes});
    }
    p.scalars = scalars(n);
    pieces.push_back(std::move(p));
  }
  return pieces;
}

std::vector<LaunchPiece> flat_window_pieces(const std::vector<RangedArg>& args, int64_t elements, int64_t width,
                                            uint64_t window) {
  return window_pieces(args, elements, width, (int64_t{1} << 31) - 1,
                       [width](int64_t n) { return flat_stream_scalars(n, width); }, window);
}

std::vector<LaunchPiece> row_window_pieces(const Graph& g, const std::vector<int>& args, const std::vector<Operand>& inputs,
                                           size_t outputs, int64_t rows, int64_t cols, int64_t program_cols, uint64_t window) {
  std::vector<RangedArg> ranged;
  for (size_t i = 0; i < args.size(); ++i) {
    const auto& t = g.node(args[i]).type;
    const uint64_t bytes = dtype_bytes(t.dtype), whole = bytes * uint64_t(t.numel());
    if (i + outputs >= args.size()) {
      ranged.push_back({whole / uint64_t(rows), 0});
    } else if (i >= inputs.size() || inputs[i].layout == Layout::Row || inputs[i].layout == Layout::Scalar) {
      ranged.push_back({0, whole});
    } else if (inputs[i].strided || inputs[i].layout == Layout::Periodic) {
      return {};
    } else {
      ranged.push_back({inputs[i].layout == Layout::Column ? bytes : bytes * uint64_t(cols), 0});
    }
  }
  const int64_t max_rows = int64_t(std::bit_floor(uint64_t(((int64_t{1} << 31) - 1) / program_cols)));
  return window_pieces(ranged, rows, kSublanes, max_rows, [&](int64_t n) { return stream_scalars(n, cols, inputs); }, window);
}

}  // namespace vtpu::kernels
