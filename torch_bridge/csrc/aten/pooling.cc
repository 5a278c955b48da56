// 2-D pooling on the chip (kernels/compose/pooling.h): average and max pooling with their gradients, and
// adaptive average pooling: where the output size divides the input's an average pooling with
// kernel = stride = input / output, elsewhere windowed sums of gathers (below). [C, H, W] inputs
// run as one image. Max pooling's int64 indices are made as int32 (low, high) word pairs and
// viewed as int64, the layout the gather kernels already read indices in; the backward reads the
// low words back.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>
#include <vector>

#include "kernels/compose/pooling.h"
#include "torch_bridge/csrc/record/op_support.h"

namespace vtpu::bridge {
namespace {

using kernels::Graph;
using kernels::Pair;

// torch's int[2] pooling arguments: one value means both dims; an empty stride means the kernel.
Pair pair_of(at::IntArrayRef v, Pair if_empty) {
  if (v.empty()) return if_empty;
  return {v[0], v.size() > 1 ? v[1] : v[0]};
}

kernels::Pool2dParams pool_params(at::IntArrayRef kernel, at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                                  bool ceil_mode) {
  kernels::Pool2dParams p;
  p.kernel = pair_of(kernel, {1, 1});
  p.stride = pair_of(stride, p.kernel);
  p.padding = pair_of(padding, {0, 0});
  p.dilation = pair_of(dilation, {1, 1});
  p.ceil_mode = ceil_mode;
  return p;
}

// [C, H, W] runs as [1, C, H, W]; results go back to the caller's rank.
int lift(Graph& g, int v) {
  auto s = g.node(v).type.shape;
  if (s.size() == 3) s.insert(s.begin(), 1);
  return g.reshape(v, s);
}
int unlift_like(Graph& g, int v, const at::Tensor& like) {
  if (like.dim() == 4) return v;
  auto s = g.node(v).type.shape;
  s.erase(s.begin());
  return g.reshape(v, s);
}

// Why pooling of `self` stays off the chip, or "".
std::string unsupported(const at::Tensor& self) {
  if (self.dim() != 3 && self.dim() != 4) return "pooling inputs other than [C, H, W] or [N, C, H, W]";
  if (!at::isFloatingType(self.scalar_type())) return "integer pooling";
  return "";
}

Pair spatial(const at::Tensor& t) { return {t.size(-2), t.size(-1)}; }

at::Tensor tpu_avg_pool2d(const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef stride, at::IntArrayRef padding,
                          bool ceil_mode, bool count_include_pad, std::optional<int64_t> divisor_override) {
  const std::vector<int64_t> k(kernel.begin(), kernel.end()), s(stride.begin(), stride.end()), pa(padding.begin(), padding.end());
  const CpuFn cpu = [=](const std::vector<at::Tensor>& c) {
    return at::avg_pool2d(c[0], k, s, pa, ceil_mode, count_include_pad, divisor_override);
  };
  if (const auto why = unsupported(self); !why.empty()) return run_on_cpu("avg_pool2d", {self}, cpu, why);
  auto p = pool_params(kernel, stride, padding, {}, ceil_mode);
  p.count_include_pad = count_include_pad;
  p.divisor_override = divisor_override;
  return record("avg_pool2d", {self}, self.scalar_type(), [&](Graph& g, const std::vector<int>& v) {
    return unlift_like(g, kernels::avg_pool2d(g, lift(g, v[0]), p), self);
  }, cpu);
}

at::Tensor tpu_avg_pool2d_backward(const at::Tensor& grad_output, const at::Tensor& self, at::IntArrayRef kernel,
                                   at::IntArrayRef stride, at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                                   std::optional<int64_t> divisor_override) {
  const std::vector<int64_t> k(kernel.begin(), kernel.end()), s(stride.begin(), stride.end()), pa(padding.begin(), padding.end());
  const CpuFn cpu = [=](const std::vector<at::Tensor>& c) {
    return at::avg_pool2d_backward(c[0], c[1], k, s, pa, ceil_mode, count_include_pad, divisor_override);
  };
  if (const auto why = unsupported(self); !why.empty()) return run_on_cpu("avg_pool2d_backward", {grad_output, self}, cpu, why);
  auto p = pool_params(kernel, stride, padding, {}, ceil_mode);
  p.count_include_pad = count_include_pad;
  p.divisor_override = divisor_override;
  return record("avg_pool2d_backward", {grad_output}, self.scalar_type(), [&](Graph& g, const std::vector<int>& v) {
    return unlift_like(g, kernels::avg_pool2d_backward(g, lift(g, v[0]), spatial(self), p), self);
  }, [cpu, self](const std::vector<at::Tensor>& c) { return cpu({c[0], self.cpu()}); });
}

std::tuple<at::Tensor, at::Tensor> tpu_max_pool2d_with_indices(const at::Tensor& self, at::IntArrayRef kernel, at::IntArrayRef stride,
                                                               at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode) {
  const std::vector<int64_t> k(kernel.begin(), kernel.end()), s(stride.begin(), stride.end()), pa(padding.begin(), padding.end()),
      d(dilation.begin(), dilation.end());
  const auto cpu_output = [=](int which) -> CpuFn {
    return [=](const std::vector<at::Tensor>& c) {
      auto r = at::max_pool2d_with_indices(c[0], k, s, pa, d, ceil_mode);
      return which == 0 ? std::get<0>(r) : std::get<1>(r);
    };
  };
  if (const auto why = unsupported(self); !why.empty()) {
    const auto r = run_on_cpu_outputs("max_pool2d_with_indices", {self}, [&](const std::vector<at::Tensor>& c) {
      auto [values, indices] = at::max_pool2d_with_indices(c[0], k, s, pa, d, ceil_mode);
      return std::vector<at::Tensor>{values, indices};
    }, why);
    return {r[0], r[1]};
  }
  const auto p = pool_params(kernel, stride, padding, dilation, ceil_mode);
  at::Tensor values = record("max_pool2d_with_indices", {self}, self.scalar_type(), [&](Graph& g, const std::vector<int>& v) {
    return unlift_like(g, kernels::max_pool2d(g, lift(g, v[0]), p).first, self);
  }, cpu_output(0));
  // The indices as int32 (low, high) words.
  at::Tensor pairs = record("max_pool2d_with_indices", {self}, at::kInt, [&](Graph& g, const std::vector<int>& v) {
    return int64_words(g, g.cast(unlift_like(g, kernels::max_pool2d(g, lift(g, v[0]), p).second, self), kernels::DType::I32));
  }, cpu_output(1));
  return {values, as_int64(pairs, self.size(-2) * self.size(-1) - 1)};
}

at::Tensor tpu_max_pool2d_with_indices_backward(const at::Tensor& grad_output, const at::Tensor& self, at::IntArrayRef kernel,
                                                at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                                                bool ceil_mode, const at::Tensor& indices) {
  const std::vector<int64_t> k(kernel.begin(), kernel.end()), s(stride.begin(), stride.end()), pa(padding.begin(), padding.end()),
      d(dilation.begin(), dilation.end());
  const CpuFn cpu = [=](const std::vector<at::Tensor>& c) {
    return at::max_pool2d_with_indices_backward(c[0], c[1], k, s, pa, d, ceil_mode, c[2]);
  };
  const std::vector<at::Tensor> all = {grad_output, self, indices};
  if (const auto why = unsupported(self); !why.empty()) return run_on_cpu("max_pool2d_with_indices_backward", all, cpu, why);
  if (!indices.device().is_privateuseone() || indices.scalar_type() != at::kLong) {
    return run_on_cpu("max_pool2d_with_indices_backward", all, cpu, "indices that are not int64 on the tpu");
  }
  const auto p = pool_params(kernel, stride, padding, dilation, ceil_mode);
  const at::Tensor words = index_words(indices);  // [n, 2] int32
  return record("max_pool2d_with_indices_backward", {grad_output, words}, self.scalar_type(),
                [&](Graph& g, const std::vector<int>& v) {
    const int64_t n = g.node(v[1]).type.shape[0];
    const int grad = lift(g, v[0]);
    const int low = g.cast(g.strided_copy(v[1], {n}, {2}, 0, "max_pool2d_indices"), kernels::DType::F32);
    return unlift_like(g, kernels::max_pool2d_backward(g, grad, g.reshape(low, g.node(grad).type.shape), spatial(self), p), self);
  }, [cpu, self, indices](const std::vector<at::Tensor>& c) { return cpu({c[0], self.cpu(), indices.cpu()}); });
}

// Adaptive average pooling whose output size divides the input's: windows of input / output,
// side by side, as an average pooling. Other sizes: adaptive_average.
std::optional<kernels::Pool2dParams> adaptive_as_pool(const at::Tensor& self, Pair out) {
  const Pair in = spatial(self);
  if (out[0] < 1 || out[1] < 1 || in[0] % out[0] || in[1] % out[1]) return std::nullopt;
  kernels::Pool2dParams p;
  p.kernel = p.stride = {in[0] / out[0], in[1] / out[1]};
  return p;
}

// Adaptive average pooling to any size, one pooled dim at a time: output i averages input
// [floor(i in / out), ceil((i + 1) in / out)). Each window's elements are gathered (index_select)
// and summed in the CPU's order, never multiplied by a 0 outside the window as a product with an
// averaging matrix would be: an infinity there made the whole row NaN (inf * 0), where the CPU's
// window sum keeps it inside its own windows. The backward sums, for each input element, the
// gradients of the windows holding it (a contiguous range of outputs), each divided by its
// window's size first. `in` and `out`: the pooled (last) dims' sizes before and after pooling; x
// holds `in` sizes forward, `out` sizes backward (a gradient).
struct Windows {
  std::vector<int64_t> start, end;  // output i covers input [start[i], end[i])
};

Windows adaptive_windows(int64_t in, int64_t out) {
  Windows w;
  for (int64_t i = 0; i < out; ++i) {
    w.start.push_back((i * in) / out);
    w.end.push_back(((i + 1) * in + out - 1) / out);
  }
  return w;
}

// For each input element of `in`, the range of windows holding it.
Windows holders(const Windows& w, int64_t in) {
  Windows h{std::vector<int64_t>(in, 0), std::vector<int64_t>(in, 0)};
  std::vector<bool> seen(in, false);
  for (int64_t i = 0; i < static_cast<int64_t>(w.start.size()); ++i)
    for (int64_t j = w.start[i]; j < w.end[i]; ++j) {
      if (!seen[j]) h.start[j] = i;
      seen[j] = true;
      h.end[j] = i + 1;
    }
  return h;
}

// Along dim d of x (size n), the sum over each range of r, in order: the ranges' k-th elements
// gathered (index_select; shorter ranges gather the appended 0) and added, k = 0, 1, ... One
// gather per k keeps every gather and add the shape of the result; gathering all k into a new
// dim and reducing it costs several times more on the chip.
at::Tensor range_sums(const at::Tensor& x, int64_t d, const Windows& r) {
  const int64_t n = x.size(d), count = static_cast<int64_t>(r.start.size());
  int64_t longest = 0;
  for (int64_t i = 0; i < count; ++i) longest = std::max(longest, r.end[i] - r.start[i]);
  std::vector<int64_t> zero_shape = x.sizes().vec();
  zero_shape[d] = 1;
  const at::Tensor padded = at::cat({x, at::zeros(zero_shape, x.options())}, d);
  at::Tensor total;
  for (int64_t k = 0; k < longest; ++k) {
    at::Tensor index = at::empty({count}, at::kLong);
    auto a = index.accessor<int64_t, 1>();
    for (int64_t i = 0; i < count; ++i) a[i] = r.start[i] + k < r.end[i] ? r.start[i] + k : n;
    const at::Tensor kth = padded.index_select(d, index.to(x.device()));
    total = k == 0 ? kth : total + kth;
  }
  return total;
}

// Window sizes as a tensor that broadcasts along dim d of a tensor of `rank` dims.
at::Tensor sizes_along(const Windows& w, int64_t d, int64_t rank, const at::Tensor& like) {
  const int64_t count = static_cast<int64_t>(w.start.size());
  at::Tensor s = at::empty({count}, at::kFloat);
  auto a = s.accessor<float, 1>();
  for (int64_t i = 0; i < count; ++i) a[i] = static_cast<float>(w.end[i] - w.start[i]);
  std::vector<int64_t> shape(rank, 1);
  shape[d] = count;
  return s.view(shape).to(like.device());
}

at::Tensor adaptive_average(const at::Tensor& x, const std::vector<int64_t>& in, const std::vector<int64_t>& out, bool backward) {
  at::Tensor y = x.to(at::kFloat);
  const int64_t k = static_cast<int64_t>(in.size());
  for (int64_t j = 0; j < k; ++j) {
    const int64_t d = x.dim() - k + j;
    const Windows w = adaptive_windows(in[j], out[j]);
    y = backward ? range_sums(y / sizes_along(w, d, y.dim(), y), d, holders(w, in[j]))
                 : range_sums(y, d, w) / sizes_along(w, d, y.dim(), y);
  }
  return y.to(x.scalar_type()).contiguous();
}

at::Tensor tpu_adaptive_avg_pool2d(const at::Tensor& self, at::IntArrayRef output_size) {
  const std::vector<int64_t> o(output_size.begin(), output_size.end());
  const CpuFn cpu = [o](const std::vector<at::Tensor>& c) { return at::_adaptive_avg_pool2d(c[0], o); };
  std::string why = unsupported(self);
  const Pair out = pair_of(output_size, {1, 1});
  const auto p = why.empty() ? adaptive_as_pool(self, out) : std::nullopt;
  if (why.empty() && !p) {  // windows of varying size
    const Pair in = spatial(self);
    return adaptive_average(self, {in[0], in[1]}, {out[0], out[1]}, false);
  }
  if (!why.empty()) return run_on_cpu("_adaptive_avg_pool2d", {self}, cpu, why);
  return record("_adaptive_avg_pool2d", {self}, self.scalar_type(), [&](Graph& g, const std::vector<int>& v) {
    return unlift_like(g, kernels::avg_pool2d(g, lift(g, v[0]), *p), self);
  }, cpu);
}

at::Tensor tpu_adaptive_avg_pool2d_backward(const at::Tensor& grad_output, const at::Tensor& self) {
  const CpuFn cpu = [self](const std::vector<at::Tensor>& c) { return at::_adaptive_avg_pool2d_backward(c[0], self.cpu()); };
  std::string why = unsupported(self);
  const auto p = why.empty() ? adaptive_as_pool(self, spatial(grad_output)) : std::nullopt;
  if (why.empty() && !p) {
    const Pair in = spatial(self), out = spatial(grad_output);
    return adaptive_average(grad_output, {in[0], in[1]}, {out[0], out[1]}, true);
  }
  if (!why.empty()) return run_on_cpu("_adaptive_avg_pool2d_backward", {grad_output}, cpu, why);
  return record("_adaptive_avg_pool2d_backward", {grad_output}, self.scalar_type(), [&](Graph& g, const std::vector<int>& v) {
    return unlift_like(g, kernels::avg_pool2d_backward(g, lift(g, v[0]), spatial(self), *p), self);
  }, cpu);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("avg_pool2d", tpu_avg_pool2d);
  m.impl("avg_pool2d_backward", tpu_avg_pool2d_backward);
  m.impl("max_pool2d_with_indices", tpu_max_pool2d_with_indices);
  m.impl("max_pool2d_with_indices_backward", tpu_max_pool2d_with_indices_backward);
  m.impl("_adaptive_avg_pool2d", tpu_adaptive_avg_pool2d);
  m.impl("_adaptive_avg_pool2d_backward", tpu_adaptive_avg_pool2d_backward);
}

}  // namespace vtpu::bridge
