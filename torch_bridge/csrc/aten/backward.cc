// Backward ops autograd calls for the lowered forward ops, built from the same graph nodes so
// they fuse with their neighbours (relu, gelu, tanh, softmax, log_softmax, layer_norm).
#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>
#include <torch/library.h>

#include <cmath>

#include "kernels/compose/reduce_dims.h"
#include "kernels/generators/row_spec.h"
#include "torch_bridge/csrc/aten/variants.h"
#include "torch_bridge/csrc/record/op_support.h"
#include "torch_bridge/csrc/runtime/runtime.h"

namespace vtpu::bridge {
namespace {

using kernels::ExprOp;
using kernels::Graph;
using kernels::RowOp;

// shape with the last dim set to 1: a per-row statistic, broadcast back along the row.
std::vector<int64_t> per_row(const Graph& g, int v) {
  auto shape = g.node(v).type.shape;
  shape.back() = 1;
  return shape;
}

// nn.Embedding's backward: the rows of grad_output summed into zeros at their indices, in order,
// on the chip (a scatter-add kernel). Scaling by frequency goes to the CPU.
at::Tensor tpu_embedding_dense_backward(const at::Tensor& grad_output, const at::Tensor& indices, int64_t num_weights,
                                        int64_t padding_idx, bool scale_grad_by_freq) {
  const CpuFn cpu = [&](const std::vector<at::Tensor>& c) {
    return at::embedding_dense_backward(c[0], indices.cpu(), num_weights, padding_idx, scale_grad_by_freq);
  };
  const bool index_ok = indices.scalar_type() == at::kLong || indices.scalar_type() == at::kInt;
  if (scale_grad_by_freq || !index_ok || !indices.device().is_privateuseone()) {
    return run_on_cpu("embedding_dense_backward", {grad_output}, cpu,
                      scale_grad_by_freq ? "scale_grad_by_freq" : "indices that are not int32/int64 on the device");
  }
  const int64_t width = grad_output.numel() / std::max<int64_t>(indices.numel(), 1);
  const at::Tensor rows = grad_output.reshape({indices.numel(), width});
  const bool pairs = indices.scalar_type() == at::kLong;
  at::Tensor out = record("embedding_dense_backward", {rows, index_words(indices)}, grad_output.scalar_type(),
                          [&](Graph& g, const std::vector<int>& v) {
                            return g.scatter_add(v[0], v[1], pairs, num_weights, padding_idx);
                          }, cpu);
  return out.view({num_weights, width});
}

at::Tensor tpu_threshold_backward(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& threshold) {
  const double t = threshold.toDouble();
  return record("threshold_backward", {grad, self}, grad.scalar_type(), [&](Graph& g, const std::vector<int>& v) {
    // torch's rule, x <= threshold ? 0 : grad, lets a NaN x pass the gradient through
    return g.where(g.binary_scalar(ExprOp::Le, v[1], t), g.full({g.node(v[0]).type.shape, g.node(v[0]).type.dtype}, 0.0), v[0]);
  }, [t](const std::vector<at::Tensor>& c) { return at::threshold_backward(c[0], c[1], t); });
}

// hardshrink and softshrink pass the gradient where |x| > lambda, by torch's rule
// -lambda <= x <= lambda ? 0 : grad (so a NaN x passes it).
at::Tensor shrink_backward(const char* op, const at::Tensor& grad, const at::Tensor& self, double lambd, const CpuFn& cpu) {
  return record_elementwise(op, {grad, self}, grad.scalar_type(), [&](Graph& g, const std::vector<int>& v) {
    const int inside = g.binary(ExprOp::And, g.binary_scalar(ExprOp::Ge, v[1], -lambd), g.binary_scalar(ExprOp::Le, v[1], lambd));
    return g.where(inside, g.full({{1}, g.node(v[0]).type.dtype}, 0.0, op), v[0], op);
  }, cpu);
}
at::Tensor tpu_hardshrink_backward(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& lambd) {
  return shrink_backward("hardshrink_backward", grad, self, lambd.toDouble(),
                         [lambd](const std::vector<at::Tensor>& c) { return at::hardshrink_backward(c[0], c[1], lambd); });
}
at::Tensor tpu_softshrink_backward(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& lambd) {
  return shrink_backward("softshrink_backward", grad, self, lambd.toDouble(),
                         [lambd](const std::vector<at::Tensor>& c) { return at::softshrink_backward(c[0], c[1], lambd); });
}

// d gelu / dx: erf form 0.5 (1 + erf(x / sqrt 2)) + x exp(-x^2 / 2) / sqrt(2 pi); tanh form
// 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2 / pi) (1 + 3 c x^2), t = tanh(sqrt(2 / pi) (x + c x^3)).
at::Tensor tpu_gelu_backward(const at::Tensor& grad, const at::Tensor& self, c10::string_view approximate) {
  const bool tanh_form = approximate == "tanh";
  const std::string approx(approximate);
  return record("gelu_backward", {grad, self}, grad.scalar_type(), [&](Graph& g, const std::vector<int>& v) {
    const int x = v[1];
    int d;
    if (!tanh_form) {
      const int cdf = g.binary_scalar(ExprOp::Mul, g.binary_scalar(ExprOp::Add, g.unary(ExprOp::Erf, g.binary_scalar(ExprOp::Mul, x, M_SQRT1_2)), 1.0), 0.5);
      const int pdf = g.binary_scalar(ExprOp::Mul, g.unary(ExprOp::Exp, g.binary_scalar(ExprOp::Mul, g.unary(ExprOp::Square, x), -0.5)),
                                      1.0 / std::sqrt(2 * M_PI));
      d = g.binary(ExprOp::Add, cdf, g.binary(ExprOp::Mul, x, pdf));
    } else {
      const double k = std::sqrt(2 / M_PI), c = 0.044715;
      const int x2 = g.unary(ExprOp::Square, x);
      const int inner = g.binary_scalar(ExprOp::Mul, g.binary(ExprOp::Mul, x, g.binary_scalar(ExprOp::Add, g.binary_scalar(ExprOp::Mul, x2, c), 1.0)), k);
      const int t = g.unary(ExprOp::Tanh, inner);
      const int left = g.binary_scalar(ExprOp::Mul, g.binary_scalar(ExprOp::Add, t, 1.0), 0.5);
      const int sech2 = g.binary_scalar(ExprOp::Sub, g.unary(ExprOp::Square, t), 1.0, /*scalar_first=*/true);
      const int dinner = g.binary_scalar(ExprOp::Mul, g.binary_scalar(ExprOp::Add, g.binary_scalar(ExprOp::Mul, x2, 3 * c), 1.0), k);
      d = g.binary(ExprOp::Add, left, g.binary_scalar(ExprOp::Mul, g.binary(ExprOp::Mul, g.binary(ExprOp::Mul, x, sech2), dinner), 0.5));
    }
    return g.binary(ExprOp::Mul, v[0], d);
  }, [approx](const std::vector<at::Tensor>& c) { return at::gelu_backward(c[0], c[1], approx); });
}

// d tanh / dx = 1 - y^2, as one fused multiply-add, as torch's CPU kernel computes it: where tanh
// saturates (y near +-1), a rounded y^2 leaves 1 - y^2 only a few correct bits (1445 ulps off at
// y = 0.99983 where the CPU is within 2). Complex inputs take torch's formula, conj included.
at::Tensor tpu_tanh_backward(const at::Tensor& grad_output, const at::Tensor& output) {
  if (grad_output.is_complex() || output.is_complex()) {
    return at::mul(grad_output, at::rsub(at::mul(output, output), 1).conj());
  }
  const auto dtype = at::result_type(grad_output, output);
  return record_elementwise("tanh_backward", {grad_output, output}, dtype, [&](Graph& g, const std::vector<int>& v) {
    const auto f32 = [&](int x) { return g.node(x).type.dtype == kernels::DType::F32 ? x : g.cast(x, kernels::DType::F32, "tanh_backward"); };
    const int y = f32(v[1]);
    const int one = g.full({g.node(y).type.shape, kernels::DType::F32}, 1.0, "tanh_backward");
    return g.binary(ExprOp::Mul, f32(v[0]), g.fma(g.unary(ExprOp::Neg, y, "tanh_backward"), y, one, "tanh_backward"), "tanh_backward");
  }, [](const std::vector<at::Tensor>& c) { return at::tanh_backward(c[0], c[1]); });
}

bool is_last(int64_t dim, int64_t ndim) { return dim == -1 || dim == ndim - 1; }

// softmax: y (g - sum(g y)); log_softmax: g - exp(y) sum(g), both along the last dim.
at::Tensor softmax_backward(const char* op, bool log, const at::Tensor& grad, const at::Tensor& out, int64_t dim,
                            c10::ScalarType input_dtype, const CpuFn& cpu) {
  // Moved operands run along their last dim, on the chip or (Double, ...) on the CPU.
  const CpuFn along_last = [log, input_dtype](const std::vector<at::Tensor>& c) {
    return log ? at::_log_softmax_backward_data(c[0], c[1], -1, input_dtype) : at::_softmax_backward_data(c[0], c[1], -1, input_dtype);
  };
  if (out.dim() == 0) return softmax_backward(op, log, grad.reshape({1}), out.reshape({1}), 0, input_dtype, along_last).reshape({});
  if (!is_last(dim, out.dim())) {  // the other dim moved last (a layout copy) and back, as the forward
    const int64_t d = at::maybe_wrap_dim(dim, out.dim());
    return softmax_backward(op, log, grad.transpose(d, -1), out.transpose(d, -1), -1, input_dtype, along_last).transpose(d, -1);
  }
  // In f32 whatever the dtypes (as torch's kernels compute): g - sum(g y) cancels, and bf16
  // intermediates would round away what is left. The result has the forward input's dtype.
  if (out.size(-1) > kernels::kMaxRowCols) {  // a long reduction composes from pieces of the row (as the forward)
    const at::Tensor dy = grad.to(at::kFloat), y = out.to(at::kFloat);
    const at::Tensor dx = log ? dy - y.exp() * dy.sum(-1, true) : y * (dy - (dy * y).sum(-1, true));
    return dx.to(input_dtype);
  }
  return record(op, {grad, out}, input_dtype, [&](Graph& g, const std::vector<int>& in) {
    const auto f32 = [&](int x) { return g.node(x).type.dtype == kernels::DType::F32 ? x : g.cast(x, kernels::DType::F32, op); };
    const int dy = f32(in[0]), y = f32(in[1]);
    const int gy = log ? dy : g.binary(ExprOp::Mul, dy, y);
    const int s = g.reshape(g.row(RowOp::Sum, gy), per_row(g, dy));
    if (log) return g.binary(ExprOp::Sub, dy, g.binary(ExprOp::Mul, g.unary(ExprOp::Exp, y), s));
    return g.binary(ExprOp::Mul, y, g.binary(ExprOp::Sub, dy, s));
  }, cpu);
}

at::Tensor tpu_softmax_backward(const at::Tensor& grad, const at::Tensor& out, int64_t dim, c10::ScalarType input_dtype) {
  return softmax_backward("_softmax_backward_data", false, grad, out, dim, input_dtype,
                          [dim, input_dtype](const std::vector<at::Tensor>& c) { return at::_softmax_backward_data(c[0], c[1], dim, input_dtype); });
}
at::Tensor tpu_log_softmax_backward(const at::Tensor& grad, const at::Tensor& out, int64_t dim, c10::ScalarType input_dtype) {
  return softmax_backward("_log_softmax_backward_data", true, grad, out, dim, input_dtype,
                          [dim, input_dtype](const std::vector<at::Tensor>& c) { return at::_log_softmax_backward_data(c[0], c[1], dim, input_dtype); });
}

// Layer norm over the last dim, with xhat = (x - mean) rstd and gw = g w:
//   dx = rstd (gw - mean_row(gw) - xhat mean_row(gw xhat)),  dw = sum_rows(g xhat),  db = sum_rows(g).
std::tuple<at::Tensor, at::Tensor, at::Tensor> tpu_native_layer_norm_backward(
    const at::Tensor& grad, const at::Tensor& input, at::IntArrayRef normalized_shape, const at::Tensor& mean,
    const at::Tensor& rstd, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    std::array<bool, 3> mask) {
  std::vector<int64_t> ns(normalized_shape.begin(), normalized_shape.end());
  const bool has_w = weight && weight->defined();
  std::vector<at::Tensor> inputs = {grad, input, mean, rstd};
  if (has_w) inputs.push_back(*weight);
  // The bias only says whether db is wanted; it is copied to the host only if the CPU runs the
  // op (copying it here would synchronise every deferred backward).
  const at::Tensor given_bias = bias && bias->defined() ? *bias : at::Tensor();
  const CpuOutputsFn cpu = [ns, has_w, mask, given_bias](const std::vector<at::Tensor>& c) {
    const std::optional<at::Tensor> cpu_bias = given_bias.defined() ? std::optional(given_bias.cpu()) : std::nullopt;
    auto [dx, dw, db] = at::native_layer_norm_backward(c[0], c[1], ns, c[2], c[3], has_w ? std::optional(c[4]) : std::nullopt,
                                                       cpu_bias, mask);
    return std::vector<at::Tensor>{dx, dw, db};
  };
  if (ns.size() != 1) {  // the last k dims flattened into one, as the forward normalised them
    const int64_t lead = input.dim() - static_cast<int64_t>(ns.size()), n = c10::multiply_integers(ns);
    std::vector<int64_t> flat(input.sizes().begin(), input.sizes().begin() + lead), stats = flat;
    flat.push_back(n);
    stats.push_back(1);
    const auto flat_param = [n](const std::optional<at::Tensor>& p) -> std::optional<at::Tensor> {
      return p && p->defined() ? std::optional(p->reshape({n})) : std::nullopt;
    };
    auto [dx, dw, db] = tpu_native_layer_norm_backward(grad.reshape(flat), input.reshape(flat), {n}, mean.reshape(stats),
                                                       rstd.reshape(stats), flat_param(weight), flat_param(bias), mask);
    return {dx.defined() ? dx.view(input.sizes()) : dx, dw.defined() ? dw.view(normalized_shape) : dw,
            db.defined() ? db.view(normalized_shape) : db};
  }
  // One result's CPU path (record's fallback when a kernel cannot be built for it).
  const auto cpu_part = [cpu](int which) -> CpuFn { return [cpu, which](const std::vector<at::Tensor>& c) { return cpu(c)[which]; }; };
  const int64_t leading = input.dim() - 1;
  std::vector<int64_t> rows_dims;
  for (int64_t d = 0; d < leading; ++d) rows_dims.push_back(d);
  const auto xhat_of = [&](Graph& g, const std::vector<int>& v) {
    return g.binary(ExprOp::Mul, g.binary(ExprOp::Sub, v[1], v[2]), v[3]);
  };
  at::Tensor dx, dw, db;
  if (mask[0] && input.size(-1) > kernels::kMaxRowCols) {  // the row means as reductions that split a long row (as the forward)
    const at::Tensor g = grad.to(at::kFloat), xhat = (input.to(at::kFloat) - mean.to(at::kFloat)) * rstd.to(at::kFloat);
    const at::Tensor gw = has_w ? g * weight->to(at::kFloat) : g;
    dx = (rstd.to(at::kFloat) * (gw - gw.mean(-1, true) - xhat * (gw * xhat).mean(-1, true))).to(input.scalar_type());
  } else if (mask[0]) {
    dx = record("native_layer_norm_backward", inputs, input.scalar_type(), [&](Graph& g, const std::vector<int>& v) {
      const int xhat = xhat_of(g, v);
      const int gw = has_w ? g.binary(ExprOp::Mul, v[0], v[4]) : v[0];
      const int a = g.reshape(g.row(RowOp::Mean, gw), per_row(g, v[0]));
      const int b = g.reshape(g.row(RowOp::Mean, g.binary(ExprOp::Mul, gw, xhat)), per_row(g, v[0]));
      return g.binary(ExprOp::Mul, v[3], g.binary(ExprOp::Sub, g.binary(ExprOp::Sub, gw, a), g.binary(ExprOp::Mul, xhat, b)));
    }, cpu_part(0));
  }
  if (mask[1] && has_w) {
    dw = record("native_layer_norm_backward", inputs, weight->scalar_type(), [&](Graph& g, const std::vector<int>& v) {
      return kernels::reduce_dims(g, g.binary(ExprOp::Mul, v[0], xhat_of(g, v)), rows_dims, RowOp::Sum);
    }, cpu_part(1));
  }
  if (mask[2] && bias && bias->defined()) {
    db = record("native_layer_norm_backward", inputs, bias->scalar_type(), [&](Graph& g, const std::vector<int>& v) {
      return kernels::reduce_dims(g, v[0], rows_dims, RowOp::Sum);
    }, cpu_part(2));
  }
  return {dx, dw, db};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("threshold_backward", tpu_threshold_backward);
  m.impl("hardshrink_backward", tpu_hardshrink_backward);
  m.impl("hardshrink_backward.grad_input", Variants<tpu_hardshrink_backward>::out);
  m.impl("softshrink_backward", tpu_softshrink_backward);
  m.impl("softshrink_backward.grad_input", Variants<tpu_softshrink_backward>::out);
  m.impl("embedding_dense_backward", tpu_embedding_dense_backward);
  m.impl("gelu_backward", tpu_gelu_backward);
  m.impl("tanh_backward", tpu_tanh_backward);
  m.impl("tanh_backward.grad_input", Variants<tpu_tanh_backward>::out);
  m.impl("_softmax_backward_data", tpu_softmax_backward);
  m.impl("_log_softmax_backward_data", tpu_log_softmax_backward);
  m.impl("native_layer_norm_backward", tpu_native_layer_norm_backward);
}

}  // namespace vtpu::bridge
