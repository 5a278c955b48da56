// Convolutions as the MXU runs them: a strided copy gathers every output position's window into
// a column (im2col), one matmul multiplies the columns by the weight. Built from graph nodes that
// already exist (pad, strided copy, matmul, concat, column reduction), so fusion, memory planning
// and the program cache treat a convolution like any other group of ops. NCHW with two spatial
// dims; the bridge runs conv1d as a conv2d of height 1.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "kernels/graph/graph.h"
#include "sim/chip_config.h"

namespace vtpu::kernels {

struct Conv2dParams {
  std::array<int64_t, 2> stride{1, 1}, padding{0, 0}, dilation{1, 1};  // (height, width)
  int64_t groups = 1;
  int passes = 1;  // MXU passes per matmul (the f32 precision, see matmul.h)
  // The chip the matmuls will run on: one whose K outgrows its VMEM is split (long_k_matmul.h).
  // Null: never split.
  const sim::ChipConfig* chip = nullptr;
};

// Grouped convolutions run as one matmul batched over the groups, at any group count; depthwise
// ones (one input channel per group) go to the vector unit.

int64_t conv_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t padding, int64_t dilation);

// conv2d(x, w) + bias: x [N, C, H, W], w [O, C / groups, kh, kw], bias [O] or -1 -> [N, O, OH, OW].
int conv2d(Graph& g, int x, int w, int bias, const Conv2dParams& p);

// y [N, C, H, W] + bias [C] broadcast over the images and positions.
int add_channel_bias(Graph& g, int y, int bias);

// The gradient of conv2d with respect to x, given grad_y [N, O, OH, OW]: [N, C, H, W] with
// (H, W) = input_hw.
int conv2d_input_grad(Graph& g, int grad_y, int w, std::array<int64_t, 2> input_hw, const Conv2dParams& p);

// conv_transpose2d(x, w) + bias: x [N, C, H, W], w [C, O / groups, kh, kw], bias [O] or -1 ->
// [N, O, output_hw], as the CPU computes it: one matmul gives every input position's window of
// contributions (no product with the zeros a stride would insert), and col2im sums the windows'
// overlaps, in f32, rounded once. conv2d_input_grad's formulation (a convolution over x dilated by
// the stride) multiplies each weight by those zeros: stride^2 times the products, and NaN from an
// infinite weight where the CPU's sum is infinite.
int conv_transpose2d(Graph& g, int x, int w, std::array<int64_t, 2> output_hw, const Conv2dParams& p, int bias = -1);

// The gradient of conv2d with respect to w ([O, C / groups, kh, kw]), given grad_y and x.
int conv2d_weight_grad(Graph& g, int grad_y, int x, std::array<int64_t, 2> kernel_hw, int64_t out_channels,
                       const Conv2dParams& p);

}  // namespace vtpu::kernels
