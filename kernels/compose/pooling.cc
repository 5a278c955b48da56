// See pooling.h. Windows that ceil_mode adds past the input read an extra band of padding after
// it; average pooling's divisor is then each window's count of elements that count (torch's
// rule), taken as a window sum over a mask of ones, so no per-position arithmetic is needed.
#include "kernels/compose/pooling.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "kernels/codegen/asm_writer.h"

namespace vtpu::kernels {
namespace {

constexpr double kNoPosition = 1 << 30;  // larger than any position, exact in f32

struct Geometry {
  int64_t images = 1;  // N * C
  Pair in{}, out{}, extra{};
  int64_t taps = 1;
  int64_t positions() const { return out[0] * out[1]; }
};

Geometry geometry(const std::vector<int64_t>& xs, const Pool2dParams& p, const char* op) {
  if (xs.size() != 4) throw KernelError(fmt::format("{}: the input must be 4-D (NCHW)", op));
  Geometry geo;
  geo.images = xs[0] * xs[1];
  geo.taps = p.kernel[0] * p.kernel[1];
  for (int d = 0; d < 2; ++d) {
    // torch's own rule: padding at most half the effective (dilated) kernel, so every window
    // holds at least one input element.
    if (p.kernel[d] < 1 || p.stride[d] < 1 || p.dilation[d] < 1 || p.padding[d] < 0 ||
        2 * p.padding[d] > p.dilation[d] * (p.kernel[d] - 1) + 1) {
      throw KernelError(fmt::format("{}: kernel, stride, dilation >= 1 and padding at most half the kernel", op));
    }
    geo.in[d] = xs[2 + d];
    geo.out[d] = pool_output_size(geo.in[d], p.kernel[d], p.stride[d], p.padding[d], p.dilation[d], p.ceil_mode);
    if (geo.out[d] < 1) throw KernelError(fmt::format("{}: the window does not fit the padded input", op));
    const int64_t reach = (geo.out[d] - 1) * p.stride[d] + p.dilation[d] * (p.kernel[d] - 1) + 1;
    geo.extra[d] = std::max<int64_t>(0, reach - (geo.in[d] + 2 * p.padding[d]));
  }
  return geo;
}

Pair padding_after(const Geometry& geo, const Pool2dParams& p) {
  return {p.padding[0] + geo.extra[0], p.padding[1] + geo.extra[1]};
}

// The windows of a padded [1, C, h, w] buffer, tap-major: [T, channels * P]. `repeat`: its one
// plane read for every channel (a stride-0 channel axis).
int taps_of(Graph& g, int padded, int64_t channels, bool repeat, const Geometry& geo, const Pool2dParams& p) {
  Windows w = windows_of(g.node(padded).type.shape, 0, repeat ? 1 : channels, p.kernel, p.dilation, {0, 0}, geo.out, p.stride);
  if (repeat) w.c = {channels, 0};
  return g.reshape(gather_by_tap(g, padded, w), {geo.taps, channels * geo.positions()});
}

// x's windows tap-major, [T, N*C*P], reading `fill` outside the input.
int windows_by_tap(Graph& g, int x, const Geometry& geo, const Pool2dParams& p, double fill) {
  const int flat = g.reshape(x, {1, geo.images, geo.in[0], geo.in[1]});
  return taps_of(g, pad_hw(g, flat, p.padding, padding_after(geo, p), fill), geo.images, false, geo, p);
}

// The flat input position each window tap reads, [T, N*C*P] (every image and channel reads the
// same positions: a stride-0 axis).
int position_windows(Graph& g, const Geometry& geo, const Pool2dParams& p) {
  if (geo.in[0] * geo.in[1] >= (int64_t{1} << 24)) throw KernelError("max_pool2d: more than 2^24 positions per image");
  const int grid = g.iota({{1, 1, geo.in[0], geo.in[1]}, DType::F32}, "max_pool2d_positions");
  const int padded = pad_hw(g, grid, p.padding, padding_after(geo, p), kNoPosition);  // never a maximum's position
  return taps_of(g, padded, geo.images, true, geo, p);
}

// Each window's count of elements that count in the average, [P]: the input, and its padding
// when count_include_pad, but never the band ceil_mode adds past the padding.
int window_counts(Graph& g, const Geometry& geo, const Pool2dParams& p) {
  Pair ones_hw = geo.in, before = p.padding, after = padding_after(geo, p);
  if (p.count_include_pad) {
    ones_hw = {geo.in[0] + 2 * p.padding[0], geo.in[1] + 2 * p.padding[1]};
    before = {0, 0};
    after = geo.extra;
  }
  const int ones = g.full({{1, 1, ones_hw[0], ones_hw[1]}, DType::F32}, 1.0, "pool_count");
  const int mask = pad_hw(g, ones, before, after, 0);
  return g.column_reduce(RowOp::Sum, taps_of(g, mask, 1, false, geo, p), "pool_count");
}

// Whether every window divides by the full tap count (no override, no partial ceil windows).
bool plain_mean(const Geometry& geo, const Pool2dParams& p) {
  return !p.divisor_override && p.count_include_pad && geo.extra[0] == 0 && geo.extra[1] == 0;
}

// v [N*C, P] divided by each window's divisor.
int divide_by_window(Graph& g, int v, const Geometry& geo, const Pool2dParams& p) {
  if (p.divisor_override) return g.binary_scalar(ExprOp::Div, v, static_cast<double>(*p.divisor_override), false, "avg_pool2d");
  if (plain_mean(geo, p)) return g.binary_scalar(ExprOp::Div, v, static_cast<double>(geo.taps), false, "avg_pool2d");
  return g.binary(ExprOp::Div, v, window_counts(g, geo, p), "avg_pool2d");
}

void check_average(const Pool2dParams& p) {
  if (p.dilation[0] != 1 || p.dilation[1] != 1) throw KernelError("avg_pool2d: no dilation");
  if (p.divisor_override && *p.divisor_override == 0) throw KernelError("avg_pool2d: divisor must be not zero");
}

}  // namespace

int64_t pool_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t padding, int64_t dilation, bool ceil_mode) {
  const int64_t span = in + 2 * padding - dilation * (kernel - 1) - 1;
  if (span < 0) return 0;
  int64_t out = (span + (ceil_mode ? stride - 1 : 0)) / stride + 1;
  if (ceil_mode && (out - 1) * stride >= in + padding) --out;  // the last window must start inside
  return out;
}

int avg_pool2d(Graph& g, int x, const Pool2dParams& p) {
  check_average(p);
  const auto xs = g.node(x).type.shape;
  const Geometry geo = geometry(xs, p, "avg_pool2d");
  const int cols = windows_by_tap(g, x, geo, p, 0);
  const int y = plain_mean(geo, p) ? g.column_reduce(RowOp::Mean, cols, "avg_pool2d")
                                   : divide_by_window(g, g.reshape(g.column_reduce(RowOp::Sum, cols, "avg_pool2d"),
                                                                   {geo.images, geo.positions()}), geo, p);
  return g.reshape(y, {xs[0], xs[1], geo.out[0], geo.out[1]});
}

int avg_pool2d_backward(Graph& g, int grad_y, Pair input_hw, const Pool2dParams& p) {
  check_average(p);
  const auto gs = g.node(grad_y).type.shape;
  if (gs.size() != 4) throw KernelError("avg_pool2d_backward: grad_output must be 4-D");
  const Geometry geo = geometry({gs[0], gs[1], input_hw[0], input_hw[1]}, p, "avg_pool2d_backward");
  if (gs[2] != geo.out[0] || gs[3] != geo.out[1]) throw KernelError("avg_pool2d_backward: grad_output does not match the windows");
  const int share = divide_by_window(g, g.reshape(grad_y, {geo.images, geo.positions()}), geo, p);
  // Every tap of a window receives the same share.
  const int per_tap = g.strided_copy(share, {geo.taps, geo.images * geo.positions()}, {0, 1}, 0, "pool_grad_taps");
  const int dx = col2im(g, g.reshape(per_tap, {geo.taps, geo.images, geo.out[0], geo.out[1]}), p.kernel, input_hw, p.stride,
                        p.padding, p.dilation);
  return g.reshape(dx, {gs[0], gs[1], input_hw[0], input_hw[1]});
}

std::pair<int, int> max_pool2d(Graph& g, int x, const Pool2dParams& p) {
  const auto xs = g.node(x).type.shape;
  const Geometry geo = geometry(xs, p, "max_pool2d");
  const int cols = windows_by_tap(g, x, geo, p, -std::numeric_limits<double>::infinity());
  const int max = g.column_reduce(RowOp::Max, cols, "max_pool2d");
  // The first maximum in scan order is the one at the smallest position; a window holding NaN
  // (its maximum) names its last NaN, as torch's CPU kernel (a NaN replaces the running maximum).
  const int at = position_windows(g, geo, p);
  const int none = g.full({{1}, DType::F32}, kNoPosition, "max_pool2d_indices");
  const int first_max = g.column_reduce(RowOp::Min, g.where(g.binary(ExprOp::Eq, cols, max), at, none), "max_pool2d_indices");
  const int below = g.full({{1}, DType::F32}, -1, "max_pool2d_indices");
  const int last_nan = g.column_reduce(RowOp::Max, g.where(g.binary(ExprOp::Ne, cols, cols), at, below), "max_pool2d_indices");
  const int first = g.where(g.binary_scalar(ExprOp::Ge, last_nan, 0), last_nan, first_max, "max_pool2d_indices");
  const std::vector<int64_t> shape{xs[0], xs[1], geo.out[0], geo.out[1]};
  return {g.reshape(max, shape), g.reshape(first, shape)};
}

int max_pool2d_backward(Graph& g, int grad_y, int indices, Pair input_hw, const Pool2dParams& p) {
  const auto gs = g.node(grad_y).type.shape;
  if (gs.size() != 4) throw KernelError("max_pool2d_backward: grad_output must be 4-D");
  const Geometry geo = geometry({gs[0], gs[1], input_hw[0], input_hw[1]}, p, "max_pool2d_backward");
  if (gs[2] != geo.out[0] || gs[3] != geo.out[1]) throw KernelError("max_pool2d_backward: grad_output does not match the windows");
  const int64_t m = geo.images * geo.positions();
  const int at = position_windows(g, geo, p);
  const int zero = g.full({{1}, g.node(grad_y).type.dtype}, 0, "max_pool2d_backward");
  const int routed = g.where(g.binary(ExprOp::Eq, at, g.reshape(indices, {m})), g.reshape(grad_y, {m}), zero, "max_pool2d_backward");
  const int dx = col2im(g, g.reshape(routed, {geo.taps, geo.images, geo.out[0], geo.out[1]}), p.kernel, input_hw, p.stride,
                        p.padding, p.dilation);
  return g.reshape(dx, {gs[0], gs[1], input_hw[0], input_hw[1]});
}

}  // namespace vtpu::kernels
