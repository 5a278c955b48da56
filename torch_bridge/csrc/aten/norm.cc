// Normalisation layers on the chip: layer norm (one row kernel), batch norm with running
// statistics (elementwise per channel; training statistics on the CPU where allowed), group norm
// through torch's math decomposition.
#include <ATen/ATen.h>
#include <ATen/native/layer_norm.h>
#include <ATen/ops/native_group_norm_native.h>

#include <torch/library.h>

#include "kernels/generators/row_spec.h"
#include "torch_bridge/csrc/record/op_support.h"
#include "torch_bridge/csrc/runtime/runtime.h"

namespace vtpu::bridge {
namespace {

using kernels::ExprOp;
using kernels::Graph;
using kernels::RowOp;

// Rows longer than a row kernel holds: the statistics as reductions, which split a long row into
// pieces (kernels/compose/reduce_dims.cc), the variance in two passes, and the normalisation
// elementwise; in f32, as the CPU's kernel computes.
std::tuple<at::Tensor, at::Tensor, at::Tensor> long_row_layer_norm(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                                                               const std::optional<at::Tensor>& bias, double eps,
                                                               at::ScalarType stat_dtype) {
  const at::Tensor x = input.to(at::kFloat);
  const at::Tensor mean = x.mean(-1, /*keepdim=*/true);
  const at::Tensor centered = x - mean;
  const at::Tensor rstd = (centered * centered).mean(-1, /*keepdim=*/true).add(eps).rsqrt();
  at::Tensor out = centered * rstd;
  if (weight && weight->defined()) out = out * weight->to(at::kFloat);
  if (bias && bias->defined()) out = out + bias->to(at::kFloat);
  return {out.to(input.scalar_type()), mean.to(stat_dtype), rstd.to(stat_dtype)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> tpu_native_layer_norm(const at::Tensor& input, at::IntArrayRef normalized_shape,
                                                                 const std::optional<at::Tensor>& weight,
                                                                 const std::optional<at::Tensor>& bias, double eps) {
  // torch's own checks (input ending in normalized_shape, weight and bias of that shape): the row
  // kernel would otherwise normalise whatever last dim it is given.
  at::native::_check_layer_norm_inputs(input, normalized_shape, weight.value_or(at::Tensor()), bias.value_or(at::Tensor()));
  std::vector<int64_t> ns(normalized_shape.begin(), normalized_shape.end());
  if (ns.size() != 1) {  // normalising the last k dims is normalising them flattened into one
    const int64_t k = static_cast<int64_t>(ns.size()), lead = input.dim() - k;
    std::vector<int64_t> flat(input.sizes().begin(), input.sizes().begin() + lead), stats = flat;
    const int64_t n = c10::multiply_integers(ns);
    flat.push_back(n);
    stats.insert(stats.end(), k, 1);
    const auto flat_param = [n](const std::optional<at::Tensor>& p) -> std::optional<at::Tensor> {
      return p && p->defined() ? std::optional(p->reshape({n})) : std::nullopt;
    };
    auto [out, mean, rstd] = tpu_native_layer_norm(input.reshape(flat), {n}, flat_param(weight), flat_param(bias), eps);
    return {out.view(input.sizes()), mean.view(stats), rstd.view(stats)};
  }
  const bool has_w = weight && weight->defined(), has_b = bias && bias->defined();
  // The statistics in the weight's dtype, else the input's (the CPU kernel's rule).
  const auto stat_dtype = has_w ? weight->scalar_type() : input.scalar_type();
  if (ns[0] > kernels::kMaxRowCols) return long_row_layer_norm(input, weight, bias, eps, stat_dtype);
  std::vector<at::Tensor> inputs = {input};
  if (has_w) inputs.push_back(*weight);
  if (has_b) inputs.push_back(*bias);
  const auto cpu_out = [&](int which) {
    return [ns, eps, has_w, has_b, which](const std::vector<at::Tensor>& c) {
      auto r = at::native_layer_norm(c[0], ns, has_w ? std::optional(c[1]) : std::nullopt,
                                     has_b ? std::optional(c[has_w ? 2 : 1]) : std::nullopt, eps);
      return which == 0 ? std::get<0>(r) : which == 1 ? std::get<1>(r) : std::get<2>(r);
    };
  };
  at::Tensor out = record("native_layer_norm", inputs, input.scalar_type(), [&](Graph& g, const std::vector<int>& v) {
    return g.row(RowOp::LayerNorm, v[0], has_w ? v[1] : -1, has_b ? v[has_w ? 2 : 1] : -1, eps);
  }, cpu_out(0));
  // mean and rstd, as autograd saves them; in defer_and_fuse they never run unless kept.
  std::vector<int64_t> stat_shape(input.sizes().begin(), input.sizes().end());
  stat_shape.back() = 1;
  at::Tensor mean = record("native_layer_norm", inputs, stat_dtype, [&](Graph& g, const std::vector<int>& v) {
    return g.row(RowOp::Mean, v[0]);
  }, cpu_out(1)).view(stat_shape);
  at::Tensor rstd = record("native_layer_norm", inputs, stat_dtype, [&](Graph& g, const std::vector<int>& v) {
    const int var = g.row(RowOp::Var, v[0], -1, -1, eps, "var", /*correction=*/0);
    return g.unary(ExprOp::Rsqrt, g.binary_scalar(ExprOp::Add, var, eps));
  }, cpu_out(2)).view(stat_shape);
  return {out, mean, rstd};
}

// Training mode: the batch's statistics per channel, computed on the chip in f32 as torch's
// decomposition computes them (biased variance to normalise; the unbiased one, n / (n - 1), for
// the running variance), and the running statistics updated in place, which the schema does not
// mark as written but every backend does.
std::tuple<at::Tensor, at::Tensor, at::Tensor> batch_norm_training(
    const at::Tensor& input, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var, double momentum,
    double eps) {
  std::vector<int64_t> dims = {0}, per_channel(input.dim() - 1, 1);  // [C, 1, ..., 1] against [N, C, ...]
  for (int64_t d = 2; d < input.dim(); ++d) dims.push_back(d);
  per_channel[0] = input.size(1);
  const at::Tensor x = input.to(at::kFloat);
  const at::Tensor mean = x.mean(dims, /*keepdim=*/true);
  const at::Tensor centred = x - mean;
  const at::Tensor biased_var = centred.square().mean(dims, /*keepdim=*/true);
  const at::Tensor invstd = (biased_var + eps).rsqrt();
  at::Tensor out = centred * invstd;
  if (weight && weight->defined()) out = out * weight->reshape(per_channel);
  if (bias && bias->defined()) out = out + bias->reshape(per_channel);
  const at::Tensor save_mean = mean.reshape({input.size(1)}), save_invstd = invstd.reshape({input.size(1)});
  const int64_t n = input.numel() / input.size(1);
  if (running_mean && running_mean->defined()) {
    running_mean->copy_(*running_mean * (1 - momentum) + save_mean * momentum);
  }
  if (running_var && running_var->defined()) {
    const double unbias = n > 1 ? double(n) / double(n - 1) : 1.0;
    running_var->copy_(*running_var * (1 - momentum) + biased_var.reshape({input.size(1)}) * (unbias * momentum));
  }
  // The saved statistics in the parameters' dtype, else the input's (the CPU kernel's rule).
  const auto stat_dtype = weight && weight->defined() ? weight->scalar_type()
                          : running_mean && running_mean->defined() ? running_mean->scalar_type()
                                                                    : input.scalar_type();
  return {out.to(input.scalar_type()), save_mean.to(stat_dtype), save_invstd.to(stat_dtype)};
}

// Batch norm with running statistics (eval mode) is elementwise per channel (dim 1):
// (x - mean) * rsqrt(var + eps) * weight + bias.
std::tuple<at::Tensor, at::Tensor, at::Tensor> tpu_native_batch_norm(
    const at::Tensor& input, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var, bool training,
    double momentum, double eps) {
  const bool has_stats = running_mean && running_mean->defined() && running_var && running_var->defined();
  TORCH_CHECK(input.dim() >= 2, "batch_norm: expected an input of at least 2 dims (N, C, ...), got ", input.dim());
  if (training || !has_stats) return batch_norm_training(input, weight, bias, running_mean, running_var, momentum, eps);
  const bool has_weight = weight && weight->defined(), has_bias = bias && bias->defined();
  std::vector<at::Tensor> inputs = {input, *running_mean, *running_var};
  if (has_weight) inputs.push_back(*weight);
  if (has_bias) inputs.push_back(*bias);
  std::vector<int64_t> per_channel(input.dim() - 1, 1);  // [C, 1, ..., 1] against [N, C, ...]
  per_channel[0] = input.size(1);
  const auto cpu = [=](const std::vector<at::Tensor>& c) {
    return std::get<0>(at::native_batch_norm(c[0], has_weight ? std::optional(c[3]) : std::nullopt,
                                             has_bias ? std::optional(c[has_weight ? 4 : 3]) : std::nullopt, c[1], c[2],
                                             false, momentum, eps));
  };
  at::Tensor out = record("native_batch_norm", inputs, input.scalar_type(), [&](Graph& g, const std::vector<int>& v) {
    const auto channel = [&](int x) { return g.reshape(x, per_channel); };
    const int inv_std = g.unary(ExprOp::Rsqrt, g.binary_scalar(ExprOp::Add, channel(v[2]), eps));
    int y = g.binary(ExprOp::Mul, g.binary(ExprOp::Sub, v[0], channel(v[1])), inv_std);
    if (has_weight) y = g.binary(ExprOp::Mul, y, channel(v[3]));
    if (has_bias) y = g.binary(ExprOp::Add, y, channel(v[has_weight ? 4 : 3]));
    return y;
  }, cpu);
  return {out, at::empty({0}, input.options()), at::empty({0}, input.options())};  // eval: no saved statistics
}

// torch's group norm for backends without a kernel of their own (math_group_norm) views its input
// flat, which a permuted input (an elementwise result in channels-last order) cannot give. It
// rounds each of its steps to a bf16 or f16 input's dtype; the CPU kernel computes in f32 and
// rounds once, so those run in f32 here too (the casts fuse into the steps' kernels).
std::tuple<at::Tensor, at::Tensor, at::Tensor> tpu_native_group_norm(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                                                                     const std::optional<at::Tensor>& bias, int64_t n, int64_t c,
                                                                     int64_t hxw, int64_t group, double eps) {
  const auto dtype = input.scalar_type();
  if (dtype != at::kBFloat16 && dtype != at::kHalf) {
    return at::native::math_group_norm(input.contiguous(), weight, bias, n, c, hxw, group, eps);
  }
  const auto wide = [](const std::optional<at::Tensor>& t) -> std::optional<at::Tensor> {
    return t && t->defined() ? std::optional(t->to(at::kFloat)) : std::nullopt;
  };
  auto [out, mean, rstd] = at::native::math_group_norm(input.contiguous().to(at::kFloat), wide(weight), wide(bias), n, c, hxw, group, eps);
  return {out.to(dtype), mean.to(dtype), rstd.to(dtype)};
}

// The functional batch norms torch's own code paths and decompositions call: with running
// statistics (updated in training), without any, and eval only. Eval returns empty saved statistics,
// as the CPU kernel does.
std::tuple<at::Tensor, at::Tensor, at::Tensor> tpu_batch_norm_legit(
    const at::Tensor& input, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    at::Tensor& running_mean, at::Tensor& running_var, bool training, double momentum, double eps) {
  return tpu_native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps);
}
std::tuple<at::Tensor, at::Tensor, at::Tensor> tpu_batch_norm_legit_no_stats(
    const at::Tensor& input, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias, bool training,
    double momentum, double eps) {
  return batch_norm_training(input, weight, bias, std::nullopt, std::nullopt, momentum, eps);
}
std::tuple<at::Tensor, at::Tensor, at::Tensor> tpu_batch_norm_legit_no_training(
    const at::Tensor& input, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    const at::Tensor& running_mean, const at::Tensor& running_var, double momentum, double eps) {
  return tpu_native_batch_norm(input, weight, bias, running_mean, running_var, false, momentum, eps);
}

// Training batch norm as torch.compile's and torch's newer paths call it: the training kernel
// and an empty cuDNN reserve.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> tpu_batch_norm_with_update(
    const at::Tensor& input, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    at::Tensor& running_mean, at::Tensor& running_var, double momentum, double eps) {
  auto [out, save_mean, save_invstd] = batch_norm_training(input, weight, bias, running_mean, running_var, momentum, eps);
  return {out, save_mean, save_invstd, at::empty({0}, input.options().dtype(at::kByte))};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_batch_norm_with_update", tpu_batch_norm_with_update);
  m.impl("_native_batch_norm_legit", tpu_batch_norm_legit);
  m.impl("_native_batch_norm_legit.no_stats", tpu_batch_norm_legit_no_stats);
  m.impl("_native_batch_norm_legit_no_training", tpu_batch_norm_legit_no_training);
  m.impl("native_layer_norm", tpu_native_layer_norm);
  m.impl("native_batch_norm", tpu_native_batch_norm);
  m.impl("native_group_norm", tpu_native_group_norm);
}

}  // namespace vtpu::bridge
