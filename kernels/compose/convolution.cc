// See convolution.h. Three ways through: one matmul of the windows' columns, batched over the groups; a
// depthwise convolution as a broadcast multiply and a column reduction over the kernel taps; and
// the input gradient as the same gathers over the output gradient, dilated by the stride, padded
// and read through the flipped kernel (negative steps in the gather), so that no scatter is needed;
// a transposed convolution as one matmul of each input position's window and col2im's sum.
#include "kernels/compose/convolution.h"

#include <fmt/format.h>

#include <algorithm>

#include "kernels/codegen/asm_writer.h"
#include "kernels/compose/long_k_matmul.h"
#include "kernels/compose/reduce_dims.h"
#include "kernels/compose/windows.h"

namespace vtpu::kernels {
namespace {

// Columns as [K, N*P] (DMA rows of output positions, one per channel, tap and image, when the
// width stride is 1) or as [N*P, K] (rows of kernel width, one per position and channel),
// whichever the copy moves in fewer DMAs. The matmul reads the second with transpose_b.
bool columns_by_position(const Windows& w) {
  const int64_t by_tap = w.c.size * w.taps() * w.n.size * (w.x.stride == 1 ? 1 : w.y.size);
  const int64_t by_position = w.n.size * w.y.size * w.x.size * w.c.size * (w.j.stride == 1 ? 1 : w.i.size);
  return by_position < by_tap;
}

// [N*P, K] or [K, N*P] columns of w's windows; with `groups` > 1, [G, N*P, K] or [G, K, N*P]:
// group gi's windows start `group_stride` further along the buffer (its channels).
int columns(Graph& g, int buf, const Windows& w, bool by_position, int64_t groups = 1, int64_t group_stride = 0) {
  const int64_t k = w.c.size * w.taps(), np = w.n.size * w.y.size * w.x.size;
  const Axis group{groups, group_stride};
  if (groups == 1) {
    if (by_position) return gather(g, buf, w, {w.n, w.y, w.x, w.c, w.i, w.j}, {np, k});
    return gather(g, buf, w, {w.c, w.i, w.j, w.n, w.y, w.x}, {k, np});
  }
  if (by_position) return gather(g, buf, w, {group, w.n, w.y, w.x, w.c, w.i, w.j}, {groups, np, k});
  return gather(g, buf, w, {group, w.c, w.i, w.j, w.n, w.y, w.x}, {groups, k, np});
}

// [C, N*P] (channels first, as the matmuls produce) -> [N, C, h, w].
int to_nchw(Graph& g, int y, int64_t n, Pair hw) {
  const int64_t c = g.node(y).type.shape[0], p = hw[0] * hw[1];
  if (n > 1) y = g.strided_copy(y, {n, c, p}, {p, n * p, 1}, 0, "conv_output");
  return g.reshape(y, {n, c, hw[0], hw[1]});
}

// [N, C, h, w] -> [C, N*P], the matmuls' layout.
int channels_first(Graph& g, int y) {
  const auto s = g.node(y).type.shape;
  const int64_t p = s[2] * s[3];
  if (s[0] > 1) y = g.strided_copy(y, {s[1], s[0], p}, {p, s[1] * p, 1}, 0, "conv_grad_output");
  return g.reshape(y, {s[1], s[0] * p});
}

// A per-channel value ([C] or [T, C]) repeated over the images, as a column operand of
// [.., N, C, P] (one value per row): a small copy, so the multiply streams instead of expanding.
int per_channel_column(Graph& g, int v, int64_t taps, int64_t n, int64_t c) {
  return g.strided_copy(v, {taps, n, c, 1}, {c, 0, 1, 0}, 0, "conv_per_channel");
}

// w [C, 1, kh, kw] as [T, C] (tap-major), for the depthwise multiply.
int taps_by_channel(Graph& g, int w) {
  const auto s = g.node(w).type.shape;
  const int64_t t = s[2] * s[3];
  return g.strided_copy(w, {t, s[0]}, {1, t}, 0, "conv_taps");
}

// Depthwise: out[n, c, p] = sum over taps t of taps[t, c] * windows[t, n, c, p], on the vector
// unit (the MXU would see one row per channel).
int depthwise(Graph& g, int buf, const Windows& w, int taps, Pair out) {
  const int64_t t = w.taps(), n = w.n.size, c = w.c.size, p = w.y.size * w.x.size;
  const int cols = gather_by_tap(g, buf, w);
  const int prod = g.binary(ExprOp::Mul, cols, per_channel_column(g, taps, t, n, c), "depthwise_conv2d");
  const int sum = g.column_reduce(RowOp::Sum, g.reshape(prod, {t, n * c * p}), "depthwise_conv2d");
  return g.reshape(sum, {n, c, out[0], out[1]});
}

// Output channels per group from which a transposed convolution runs channels last: its col2im
// copies rows of that many values (fewer, and the rows of its [T, C, H, W] planes are longer).
constexpr int64_t kLeastChannelsLast = 8;

bool is_depthwise(int64_t in_channels, int64_t out_channels, int64_t groups) {
  return groups > 1 && in_channels == groups && out_channels == groups;
}

void check(const Graph& g, int x, int w, const Conv2dParams& p) {
  const auto& xs = g.node(x).type.shape;
  const auto& ws = g.node(w).type.shape;
  if (xs.size() != 4 || ws.size() != 4) throw KernelError("conv2d: input and weight must be 4-D (NCHW, OIHW)");
  if (p.groups < 1 || xs[1] != ws[1] * p.groups || ws[0] % p.groups != 0) {
    throw KernelError(fmt::format("conv2d: {} input channels, weight {} and {} groups do not match", xs[1],
                                  to_string(g.node(w).type), p.groups));
  }
  for (int d = 0; d < 2; ++d) {
    if (p.stride[d] < 1 || p.dilation[d] < 1 || p.padding[d] < 0) throw KernelError("conv2d: strides and dilations >= 1, padding >= 0");
  }
}

// y [C, N*P] f32 sums plus bias [C], rounded once to `dtype`.
int biased(Graph& g, int y, int bias, DType dtype) {
  const int sum = g.binary(ExprOp::Add, y, g.reshape(bias, {g.node(y).type.shape[0], 1}), "conv_bias");
  return g.node(sum).type.dtype == dtype ? sum : g.cast(sum, dtype, "conv_bias");
}

}  // namespace

int64_t conv_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t padding, int64_t dilation) {
  return (in + 2 * padding - dilation * (kernel - 1) - 1) / stride + 1;
}

int add_channel_bias(Graph& g, int y, int bias) {
  const auto s = g.node(y).type.shape;
  const int sum = g.binary(ExprOp::Add, g.reshape(y, {1, s[0], s[1], s[2] * s[3]}), per_channel_column(g, bias, 1, s[0], s[1]), "conv_bias");
  return g.reshape(sum, s);
}

int conv2d(Graph& g, int x, int w, int bias, const Conv2dParams& p) {
  check(g, x, w, p);
  const auto xs = g.node(x).type.shape, ws = g.node(w).type.shape;
  const int64_t n = xs[0], c = xs[1], o = ws[0], cg = ws[1], groups = p.groups;
  const Pair kernel{ws[2], ws[3]};
  Pair out;
  for (int d = 0; d < 2; ++d) out[d] = conv_output_size(xs[2 + d], kernel[d], p.stride[d], p.padding[d], p.dilation[d]);
  if (out[0] < 1 || out[1] < 1) throw KernelError(fmt::format("conv2d: the kernel does not fit the padded input {}", to_string(g.node(x).type)));
  const int xp = pad_hw(g, x, p.padding, p.padding);
  const auto buf = g.node(xp).type.shape;  // a copy: adding nodes moves them
  if (is_depthwise(c, o, groups)) {
    const Windows win = windows_of(buf, 0, c, kernel, p.dilation, {0, 0}, out, p.stride);
    const int y = depthwise(g, xp, win, taps_by_channel(g, w), out);
    return bias < 0 ? y : add_channel_bias(g, y, bias);
  }
  const int64_t og = o / groups, k = cg * kernel[0] * kernel[1];
  // Groups as a batched matmul: [G, O/G, K] weights by [G, K, N*P] columns, one launch.
  const Windows win = windows_of(buf, 0, cg, kernel, p.dilation, {0, 0}, out, p.stride);
  const bool by_position = columns_by_position(win);
  const int wg = groups == 1 ? g.reshape(w, {o, k}) : g.reshape(w, {groups, og, k});
  const int cols = columns(g, xp, win, by_position, groups, cg * buf[2] * buf[3]);
  // with a bias, the f32 sums: the bias joins them before a bf16 or f16 result is rounded, once
  int y = matmul_with_long_k(g, wg, cols, by_position, p.passes, "conv2d", p.chip, false, bias >= 0);
  if (groups > 1) y = g.reshape(y, {o, g.node(y).type.shape.back()});  // [O, N*P]
  if (bias >= 0) y = biased(g, y, bias, g.node(x).type.dtype);
  return to_nchw(g, y, n, out);
}

int conv2d_input_grad(Graph& g, int grad_y, int w, std::array<int64_t, 2> input_hw, const Conv2dParams& p) {
  const auto gs = g.node(grad_y).type.shape, ws = g.node(w).type.shape;
  if (gs.size() != 4 || ws.size() != 4 || gs[1] != ws[0]) {
    throw KernelError(fmt::format("conv2d input gradient: {} does not match weight {}", to_string(g.node(grad_y).type), to_string(g.node(w).type)));
  }
  const int64_t n = gs[0], o = ws[0], cg = ws[1], groups = p.groups, c = cg * groups;
  const Pair kernel{ws[2], ws[3]};
  // dx[h] = sum over taps i of w[i] * grad_y dilated by the stride, read at h + padding - i * dilation.
  Pair origin;
  const int ge = dilate_and_pad_for_flipped_reads(g, grad_y, kernel, input_hw, p.stride, p.padding, p.dilation, origin);
  const auto buf = g.node(ge).type.shape;  // a copy: adding nodes moves them
  const Pair flipped{-p.dilation[0], -p.dilation[1]};
  if (is_depthwise(c, o, groups)) {
    const Windows win = windows_of(buf, 0, c, kernel, flipped, origin, input_hw, {1, 1});
    return depthwise(g, ge, win, taps_by_channel(g, w), input_hw);
  }
  const int64_t og = o / groups, t = kernel[0] * kernel[1];
  // Each group's w as [C/G, O/G * T] (element (c, o, t) = w[gi * O/G + o, c, t]), batched over
  // the groups, by each group's windows over its O/G gradient channels.
  const int wt = g.reshape(g.strided_copy(w, {groups, cg, og, t}, {og * cg * t, t, cg * t, 1}, 0, "conv_weight_t"),
                           groups == 1 ? std::vector<int64_t>{cg, og * t} : std::vector<int64_t>{groups, cg, og * t});
  const Windows win = windows_of(buf, 0, og, kernel, flipped, origin, input_hw, {1, 1});
  int dx = matmul_with_long_k(g, wt, columns(g, ge, win, false, groups, og * buf[2] * buf[3]), false, p.passes,
                              "conv2d_input_grad", p.chip);
  if (groups > 1) dx = g.reshape(dx, {c, g.node(dx).type.shape.back()});
  return to_nchw(g, dx, n, input_hw);
}

int conv_transpose2d(Graph& g, int x, int w, std::array<int64_t, 2> output_hw, const Conv2dParams& p, int bias) {
  const auto xs = g.node(x).type.shape, ws = g.node(w).type.shape;
  const int64_t n = xs[0], c = xs[1], groups = p.groups;
  if (xs.size() != 4 || ws.size() != 4 || ws[0] != c || c % groups) {
    throw KernelError(fmt::format("conv_transpose2d: {} does not match weight {} in {} groups", to_string(g.node(x).type),
                                  to_string(g.node(w).type), groups));
  }
  const int64_t cg = c / groups, og = ws[1], o = og * groups, t = ws[2] * ws[3], np = n * xs[2] * xs[3];
  const Pair kernel{ws[2], ws[3]};
  if (is_depthwise(c, o, groups)) {  // each tap times its channel on the vector unit, as conv2d's depthwise
    const int prod = g.binary(ExprOp::Mul, g.reshape(x, {1, n, c, xs[2] * xs[3]}),
                              per_channel_column(g, taps_by_channel(g, w), t, n, c), "depthwise_conv_transpose2d");
    const int sums = col2im(g, g.reshape(prod, {t, n * c, xs[2], xs[3]}), kernel, output_hw, p.stride, p.padding, p.dilation);
    const int y = g.reshape(sums, {n, c, output_hw[0], output_hw[1]});
    return bias < 0 ? y : add_channel_bias(g, y, bias);
  }
  const DType dtype = g.node(x).type.dtype;
  if (og < kLeastChannelsLast) {
    // Few output channels per group: col2im over [T, O * N, H, W] planes, from each group's w as
    // [T * O/G, C/G] by its channels of x.
    const int wt = g.strided_copy(w, {groups, t, og, cg}, {cg * og * t, 1, t, og * t}, 0, "conv_weight_t");
    const int xf = channels_first(g, x);  // [C, N*P]
    int y = groups == 1
        ? matmul_with_long_k(g, g.reshape(wt, {t * og, c}), xf, false, p.passes, "conv_transpose2d", p.chip, false, true)
        : matmul_with_long_k(g, g.reshape(wt, {groups, t * og, cg}), g.reshape(xf, {groups, cg, np}), false, p.passes,
                             "conv_transpose2d", p.chip, false, true);
    if (groups > 1) y = g.strided_copy(y, {t, groups, og, np}, {og * np, t * og * np, np, 1}, 0, "conv_transpose_taps");
    const int sums = col2im(g, g.reshape(y, {t, o * n, xs[2], xs[3]}), kernel, output_hw, p.stride, p.padding, p.dilation);
    int out = g.reshape(sums, {o, n * output_hw[0] * output_hw[1]});
    out = bias >= 0 ? biased(g, out, bias, dtype) : dtype == DType::F32 ? out : g.cast(out, dtype, "conv_transpose2d");
    return to_nchw(g, out, n, output_hw);
  }
  // Channels last, so that col2im's window copies move rows of O/G channels: each group's x as
  // [N*H*W, C/G] by its w as [C/G, T * O/G] gives every input position's window of contributions
  // (tap-major, in f32), [G * N, H, W, T * O/G].
  const int64_t hw = xs[2] * xs[3];
  const int xg = g.strided_copy(x, {groups, n, hw, cg}, {cg * hw, c * hw, 1, hw}, 0, "conv_transpose_input");
  const int wg = g.strided_copy(w, {groups, cg, t, og}, {cg * og * t, og * t, 1, t}, 0, "conv_weight_t");
  const int values = groups == 1
      ? matmul_with_long_k(g, g.reshape(xg, {np, cg}), g.reshape(wg, {cg, t * og}), false, p.passes, "conv_transpose2d", p.chip,
                           false, true)
      : matmul_with_long_k(g, g.reshape(xg, {groups, np, cg}), g.reshape(wg, {groups, cg, t * og}), false, p.passes,
                           "conv_transpose2d", p.chip, false, true);
  const int sums = col2im_channels_last(g, g.reshape(values, {groups * n, xs[2], xs[3], t * og}), kernel, output_hw, p.stride,
                                        p.padding, p.dilation);  // [G * N, OH, OW, O/G]
  const int64_t ohw = output_hw[0] * output_hw[1];
  int out = g.strided_copy(sums, {n, groups, og, ohw}, {ohw * og, n * ohw * og, 1, og}, 0, "conv_output");
  out = g.reshape(out, {n, o, output_hw[0], output_hw[1]});
  if (bias >= 0) out = add_channel_bias(g, out, g.node(bias).type.dtype == DType::F32 ? bias : g.cast(bias, DType::F32, "conv_bias"));
  return dtype == DType::F32 ? out : g.cast(out, dtype, "conv_transpose2d");  // the f32 sums plus bias, rounded once
}

int conv2d_weight_grad(Graph& g, int grad_y, int x, std::array<int64_t, 2> kernel_hw, int64_t out_channels, const Conv2dParams& p) {
  const auto gs = g.node(grad_y).type.shape, xs = g.node(x).type.shape;
  const int64_t n = xs[0], c = xs[1], o = out_channels, groups = p.groups;
  if (gs.size() != 4 || xs.size() != 4 || gs[0] != n || gs[1] != o || c % groups || o % groups) {
    throw KernelError(fmt::format("conv2d weight gradient: {} does not match input {}", to_string(g.node(grad_y).type), to_string(g.node(x).type)));
  }
  const int64_t cg = c / groups, og = o / groups, t = kernel_hw[0] * kernel_hw[1], np = n * gs[2] * gs[3];
  const Pair out{gs[2], gs[3]};
  const int xp = pad_hw(g, x, p.padding, p.padding);
  const auto buf = g.node(xp).type.shape;  // a copy: adding nodes moves them
  if (is_depthwise(c, o, groups)) {
    // dw[c, t] = sum over n, p of grad_y[n, c, p] * windows[t, n, c, p]
    const Windows win = windows_of(buf, 0, c, kernel_hw, p.dilation, {0, 0}, out, p.stride);
    const int64_t pos = out[0] * out[1];
    const int cols = gather_by_tap(g, xp, win);
    const int prod = g.binary(ExprOp::Mul, cols, g.reshape(grad_y, {n, c, pos}), "depthwise_conv2d_weight_grad");
    const int by_tap = reduce_dims(g, prod, {1, 3}, RowOp::Sum);  // [T, C]
    return g.reshape(g.strided_copy(by_tap, {c, t}, {1, c}, 0, "conv_taps"), {c, 1, kernel_hw[0], kernel_hw[1]});
  }
  const int gf = channels_first(g, grad_y);  // [O, N*P]
  const int gg = groups == 1 ? gf : g.reshape(gf, {groups, og, np});
  const Windows win = windows_of(buf, 0, cg, kernel_hw, p.dilation, {0, 0}, out, p.stride);
  const bool by_position = columns_by_position(win);
  // [G,] [O/G, N*P] @ columns^T: [K, N*P] read transposed, or [N*P, K] as it is
  const int dw = matmul_with_long_k(g, gg, columns(g, xp, win, by_position, groups, cg * buf[2] * buf[3]), !by_position,
                                    p.passes, "conv2d_weight_grad", p.chip);
  return g.reshape(dw, {o, cg, kernel_hw[0], kernel_hw[1]});
}

}  // namespace vtpu::kernels
