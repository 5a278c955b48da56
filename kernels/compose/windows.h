// Sliding windows over NCHW tensors as strided copies: the gathers behind convolutions and
// pooling (im2col), and the scatter back (col2im) written as a gather, so that overlapping
// windows sum without a scatter kernel.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "kernels/graph/graph.h"

namespace vtpu::kernels {

using Pair = std::array<int64_t, 2>;  // (height, width)

// One axis of a window gather: its extent and its step through the source buffer (elements).
struct Axis {
  int64_t size = 1, stride = 0;
};

// The windows over a dense [N, Cb, Hb, Wb] buffer: element (c, i, j, n, y, x) is
// buf[n, c0 + c, y0 + i * step_i + y * stride_y, x0 + j * step_j + x * stride_x]. Kernel steps
// are negative for flipped kernels (gradients).
struct Windows {
  Axis c, i, j, n, y, x;
  int64_t offset = 0;
  int64_t taps() const { return i.size * j.size; }
  int64_t positions() const { return y.size * x.size; }
};

Windows windows_of(const std::vector<int64_t>& buf, int64_t c0, int64_t channels, Pair kernel, Pair kernel_step, Pair origin,
                   Pair out, Pair stride);

// A dense copy of the windows with their axes in `order`, viewed as `shape`.
int gather(Graph& g, int buf, const Windows& w, std::initializer_list<Axis> order, std::vector<int64_t> shape);

// The windows tap-major, [T, N, C, P]: one row of positions per tap, image and channel, ready
// for a column reduction over the taps.
int gather_by_tap(Graph& g, int buf, const Windows& w);

// x [N, C, H, W] with `value` around its spatial dims.
int pad_hw(Graph& g, int x, Pair before, Pair after, double value = 0);

// The sum over taps of per-tap values scattered back to the positions their windows read:
// values [T, C, OH, OW] (T = kernel taps, row-major) of windows with the given stride, padding
// and dilation over an [H, W] input -> [C, H, W]. Written as a gather: the values are dilated by
// the stride and padded, then read through the flipped kernel, tap t from its own plane.
int col2im(Graph& g, int values, Pair kernel, Pair input_hw, Pair stride, Pair padding, Pair dilation);

// col2im over f32 values laid out channels last, [B, OH, OW, T * L] (tap-major within a window
// position, L lanes: a transposed convolution's matmul gives [N * OH * OW, T * C_out]) ->
// [B, H, W, L]. No dilation: the output splits into stride x stride phases (positions equal
// modulo the stride), each the sum of the taps that reach it, each tap read once as a shifted
// window (rows of L values), and the phases are interleaved (rows of L again), where interleaving
// rows of one value (col2im's layout) would copy element by element.
int col2im_channels_last(Graph& g, int values, Pair kernel, Pair output_hw, Pair stride, Pair padding, Pair dilation);

// grad [.., OH, OW] with stride - 1 zeros after each element along both spatial (last two)
// dims, and padded so that a flipped window read from any input position stays inside:
// returns the buffer and the origin (offset of input position 0) the reads start from.
int dilate_and_pad_for_flipped_reads(Graph& g, int grad, Pair kernel, Pair input_hw, Pair stride, Pair padding, Pair dilation,
                                     Pair& origin);

}  // namespace vtpu::kernels
