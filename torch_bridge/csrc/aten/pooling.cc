// 2-D pooling on the chip (kernels/compose/pooling.h): average and max pooling with their gradients, and
// adaptive average pooling where the output size divides the input's (then it is an average
// pooling with kernel = stride = input / output). [C, H, W] inputs run as one image. Max
// pooling's int64 indices are made as int32 (low, high) word pairs and viewed as int64, the
// layout the gather kernels already read indices in; the backward reads the low words back.
#include <ATen/ATen.h>
#include <torch/library.h>

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

// Adaptive average pooling to any size is linear along each pooled dim: output i averages input
// [floor(i in / out), ceil((i + 1) in / out)), the product with an [in, out] matrix of 1 / count
// (built on the host: a constant of the shapes, uploaded) on the MXU, in f32; its backward is the
// product with the same matrix transposed. `in` and `out`: the pooled (last) dims' sizes before and
// after pooling; x holds `in` sizes forward, `out` sizes backward (a gradient).
at::Tensor averaging_matrix(int64_t in, int64_t out, const at::Tensor& like, bool transposed) {
  at::Tensor m = at::zeros({in, out}, at::kFloat);
  auto a = m.accessor<float, 2>();
  for (int64_t i = 0; i < out; ++i) {
    const int64_t start = (i * in) / out, end = ((i + 1) * in + out - 1) / out;
    for (int64_t j = start; j < end; ++j) a[j][i] = 1.0f / static_cast<float>(end - start);
  }
  return (transposed ? m.t().contiguous() : m).to(like.device());
}

at::Tensor adaptive_average(const at::Tensor& x, const std::vector<int64_t>& in, const std::vector<int64_t>& out, bool backward) {
  at::Tensor y = x.to(at::kFloat);
  const int64_t k = static_cast<int64_t>(in.size());
  for (int64_t j = 0; j < k; ++j) {
    const int64_t d = x.dim() - k + j;
    const at::Tensor m = averaging_matrix(in[j], out[j], x, backward);  // [in, out]; backward: [out, in]
    y = at::matmul(y.transpose(d, -1), m).transpose(d, -1);
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
