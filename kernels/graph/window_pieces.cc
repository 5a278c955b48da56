#include "kernels/graph/window_pieces.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "kernels/codegen/kernel_error.h"
#include "kernels/codegen/operand.h"

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

constexpr int64_t kMaxLaunchElements = (int64_t{1} << 31) - 1;  // flat_stream_scalars' int32 count

std::vector<uint64_t> buffer_sizes(const std::vector<FlatArg>& args, int64_t elements) {
  std::vector<uint64_t> bytes;
  for (const FlatArg& a : args) bytes.push_back(a.element_bytes ? a.element_bytes * uint64_t(elements) : a.whole_bytes);
  return bytes;
}

}  // namespace

std::vector<LaunchPiece> flat_window_pieces(const std::vector<FlatArg>& args, int64_t elements, int64_t width,
                                            uint64_t window) {
  if (elements <= kMaxLaunchElements && isa::window_fits(buffer_sizes(args, elements), window)) return {};
  uint64_t per_element = 0, whole = 0;
  for (const FlatArg& a : args) {
    if (a.element_bytes) {
      per_element += a.element_bytes;
    } else {
      whole += a.whole_bytes;
    }
  }
  // What the window keeps for itself: its first base, and a guard gap plus alignment per buffer
  // (isa::next_window_base); the rest holds one piece of every ranged buffer.
  const uint64_t reserved = isa::kWindowFirstBase + args.size() * (isa::kWindowGuardBytes + 0x1000) + whole;
  // Pieces of whole rows, 4,096 elements at a time, start every buffer on a 4 KiB boundary.
  const int64_t step = std::lcm<int64_t>(width, 4096);
  int64_t piece = 0;
  if (per_element > 0 && reserved < window) {
    piece = std::min<int64_t>(kMaxLaunchElements, int64_t((window - 1 - reserved) / per_element));
    piece -= piece % step;
  }
  if (piece < step || !isa::window_fits(buffer_sizes(args, piece), window)) {
    throw KernelError(fmt::format("a flat launch of {} elements with {} bytes per element does not fit a launch's {} byte "
                                  "address window even in pieces", elements, per_element, window));
  }
  std::vector<LaunchPiece> pieces;
  for (int64_t start = 0; start < elements; start += piece) {
    const int64_t n = std::min(piece, elements - start);
    LaunchPiece p;
    for (const FlatArg& a : args) {
      p.ranges.push_back(a.element_bytes ? LaunchPiece::Range{a.element_bytes * uint64_t(start), a.element_bytes * uint64_t(n)}
                                         : LaunchPiece::Range{0, a.whole_bytes});
    }
    p.scalars = flat_stream_scalars(n, width);
    pieces.push_back(std::move(p));
  }
  return pieces;
}

}  // namespace vtpu::kernels
