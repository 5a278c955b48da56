// Pooling over NCHW windows (kernels/compose/windows.h), every image and channel at once: average pooling
// as a column sum over the window taps divided by each window's count, max pooling as a column
// max with the flat input position of each window's maximum (for torch's indices); gradients go
// back through col2im. Images and channels are one axis here: x is [N * C, H, W] viewed as
// [1, N * C, H, W].
#pragma once

#include <cstdint>
#include <optional>
#include <utility>

#include "kernels/graph/graph.h"
#include "kernels/compose/windows.h"

namespace vtpu::kernels {

struct Pool2dParams {
  Pair kernel{1, 1}, stride{1, 1}, padding{0, 0}, dilation{1, 1};
  bool ceil_mode = false;
  bool count_include_pad = true;            // average pooling: padding counts in the divisor
  std::optional<int64_t> divisor_override;  // average pooling: divide by this instead
};

// torch's pooling output size (ceil_mode keeps a last window that starts inside the input).
int64_t pool_output_size(int64_t in, int64_t kernel, int64_t stride, int64_t padding, int64_t dilation, bool ceil_mode);

// x [N, C, H, W] -> [N, C, OH, OW].
int avg_pool2d(Graph& g, int x, const Pool2dParams& p);
int avg_pool2d_backward(Graph& g, int grad_y, Pair input_hw, const Pool2dParams& p);

// Flat input positions (h * W + w) are f32 here (an iota), exact below 2^24. Returns (max
// [N, C, OH, OW], position of the first maximum in each window, f32 [N, C, OH, OW]).
std::pair<int, int> max_pool2d(Graph& g, int x, const Pool2dParams& p);
// grad_y routed to the positions `indices` (f32, as max_pool2d gives them) names, summed where
// windows overlap: [N, C, H, W].
int max_pool2d_backward(Graph& g, int grad_y, int indices, Pair input_hw, const Pool2dParams& p);

}  // namespace vtpu::kernels
