// adaptive_max_pool2d (and 1d, which torch runs through it) on the chip for any output size: each
// output position's window (rows floor(i * H / oh) to ceil((i + 1) * H / oh), columns likewise)
// is read through a table of flat input positions, padded to the largest window by repeating its
// last position (a repeat changes no maximum and comes after the original, so the first maximum
// keeps torch's scan order); a max over the table's last dim gives the value and which entry won,
// and the table turns that into the input position. NaN wins as in torch. The backward adds each
// gradient at its position (scatter_add).
#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "torch_bridge/csrc/record/op_support.h"

namespace vtpu::bridge {
namespace {

int64_t window_start(int64_t i, int64_t in, int64_t out) { return (i * in) / out; }
int64_t window_end(int64_t i, int64_t in, int64_t out) { return ((i + 1) * in + out - 1) / out; }

// [oh * ow, kh * kw] flat input positions of each output position's window, padded by repeats.
at::Tensor window_table(int64_t h, int64_t w, int64_t oh, int64_t ow) {
  int64_t kh = 0, kw = 0;
  for (int64_t i = 0; i < oh; ++i) kh = std::max(kh, window_end(i, h, oh) - window_start(i, h, oh));
  for (int64_t j = 0; j < ow; ++j) kw = std::max(kw, window_end(j, w, ow) - window_start(j, w, ow));
  std::vector<int64_t> table;
  table.reserve(oh * ow * kh * kw);
  for (int64_t i = 0; i < oh; ++i) {
    const int64_t r0 = window_start(i, h, oh), r1 = window_end(i, h, oh);
    for (int64_t j = 0; j < ow; ++j) {
      const int64_t c0 = window_start(j, w, ow), c1 = window_end(j, w, ow);
      for (int64_t a = 0; a < kh; ++a) {
        for (int64_t b = 0; b < kw; ++b) {
          // scan order row by row; past the window's last row or column, that row or column again
          table.push_back(std::min(r0 + a, r1 - 1) * w + std::min(c0 + b, c1 - 1));
        }
      }
    }
  }
  return at::tensor(table, at::kLong).reshape({oh * ow, kh * kw});  // positions below 2^24: exact in f32 too
}

// The table on the device as int32 (to index with) and f32 (to gather positions from), made once
// per shape and device: a training loop pools the same way every step, and each new table would
// be a host-to-device copy.
struct DeviceTable {
  at::Tensor index, position;
};

const DeviceTable& device_window_table(int64_t h, int64_t w, int64_t oh, int64_t ow, const at::Device& device) {
  static std::mutex mutex;
  static std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, int>, DeviceTable> tables;
  std::lock_guard lock(mutex);
  DeviceTable& t = tables[{h, w, oh, ow, device.index()}];
  if (!t.index.defined()) {
    const at::Tensor table = window_table(h, w, oh, ow);
    t = {table.to(at::kInt).to(device), table.to(at::kFloat).to(device)};
  }
  return t;
}

std::tuple<at::Tensor, at::Tensor> tpu_adaptive_max_pool2d(const at::Tensor& self, at::IntArrayRef output_size) {
  TORCH_CHECK(self.dim() == 3 || self.dim() == 4, "adaptive_max_pool2d(): Expected 3D or 4D tensor, but got: ", self.sizes());
  TORCH_CHECK(output_size.size() == 2, "adaptive_max_pool2d(): internal error: output_size.size() must be 2");
  const int64_t h = self.size(-2), w = self.size(-1), oh = output_size[0], ow = output_size[1];
  for (int64_t d = 1; d < self.dim(); ++d) {  // torch's checks and messages
    TORCH_CHECK(self.size(d) > 0, "adaptive_max_pool2d(): Expected input to have non-zero size for non-batch dimensions, "
                "but input has sizes ", self.sizes(), " with dimension ", d, " being empty");
  }
  std::vector<int64_t> out_shape(self.sizes().begin(), self.sizes().end() - 2);
  out_shape.insert(out_shape.end(), {oh, ow});
  TORCH_CHECK(oh >= 0 && ow >= 0, "Trying to create tensor with negative dimension ", std::min(oh, ow), ": ", out_shape);
  if (oh == 0 || ow == 0) return {at::empty(out_shape, self.options()), at::empty(out_shape, self.options().dtype(at::kLong))};
  TORCH_CHECK(h * w < (int64_t{1} << 24), "adaptive_max_pool2d(): planes of 2^24 elements or more are not supported on tpu");
  const DeviceTable& table = device_window_table(h, w, oh, ow, self.device());
  const int64_t k = table.index.size(1);
  const at::Tensor flat = self.flatten(-2);  // [.., H * W]
  const at::Tensor windows = flat.index_select(-1, table.index.flatten()).unflatten(-1, {oh * ow, k});
  auto [values, which] = windows.max(-1);
  // the winning entry's input position, table[p][which[.., p]], gathered as f32 (exact)
  const at::Tensor positions =
      table.position.expand(windows.sizes()).gather(-1, which.unsqueeze(-1)).squeeze(-1).to(at::kLong);
  std::vector<int64_t> shape(self.sizes().begin(), self.sizes().end() - 2);
  shape.push_back(oh);
  shape.push_back(ow);
  return {values.reshape(shape), positions.reshape(shape)};
}

std::tuple<at::Tensor&, at::Tensor&> tpu_adaptive_max_pool2d_out(const at::Tensor& self, at::IntArrayRef output_size,
                                                                  at::Tensor& out, at::Tensor& indices) {
  auto [v, i] = tpu_adaptive_max_pool2d(self, output_size);
  write_out(out, v);
  write_out(indices, i);
  return {out, indices};
}

at::Tensor tpu_adaptive_max_pool2d_backward(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& indices) {
  return at::zeros_like(self).flatten(-2).scatter_add(-1, indices.flatten(-2), grad_output.flatten(-2)).view_as(self);
}

at::Tensor& tpu_adaptive_max_pool2d_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                                                 const at::Tensor& indices, at::Tensor& grad_input) {
  return write_out(grad_input, tpu_adaptive_max_pool2d_backward(grad_output, self, indices));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("adaptive_max_pool2d", tpu_adaptive_max_pool2d);
  m.impl("adaptive_max_pool2d.out", tpu_adaptive_max_pool2d_out);
  m.impl("adaptive_max_pool2d_backward", tpu_adaptive_max_pool2d_backward);
  m.impl("adaptive_max_pool2d_backward.grad_input", tpu_adaptive_max_pool2d_backward_out);
}

}  // namespace vtpu::bridge
