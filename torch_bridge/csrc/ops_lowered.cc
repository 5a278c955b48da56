// aten ops lowered to the chip: each records graph nodes (see ops_support.h). Ops reach here
// through torch's dispatcher after autograd; composite ops (linear, matmul, layer_norm, ...)
// arrive already decomposed into these.
#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/native_group_norm_native.h>

#include <algorithm>
#include <limits>
#include <torch/library.h>

#include "kernels/generators/matmul.h"
#include "kernels/compose/reduce_dims.h"
#include "torch_bridge/csrc/ops_int64.h"
#include "torch_bridge/csrc/ops_masked.h"
#include "torch_bridge/csrc/ops_support.h"
#include "torch_bridge/csrc/recorder.h"
#include "torch_bridge/csrc/runtime.h"

namespace vtpu::bridge {
namespace {

using kernels::ExprOp;
using kernels::Graph;
using kernels::RowOp;

// A Python number as torch passes it to .Tensor overloads: a 0-dim CPU tensor flagged as a
// wrapped number, so type promotion treats it like a scalar (it never widens a tensor's dtype).
at::Tensor wrapped_scalar(const at::Scalar& s) {
  at::Tensor t = at::scalar_tensor(s, s.isFloatingPoint() ? at::kDouble : s.isBoolean() ? at::kBool : at::kLong);
  t.unsafeGetTensorImpl()->set_wrapped_number(true);
  return t;
}

at::Tensor unary(const char* op, ExprOp e, const at::Tensor& self, const CpuFn& cpu) {
  const auto dtype = at::isIntegralType(self.scalar_type(), true) && e != ExprOp::Neg && e != ExprOp::Abs && e != ExprOp::Relu
                         ? at::kFloat
                         : self.scalar_type();
  return record_elementwise(op, {self}, dtype, [&](Graph& g, const std::vector<int>& v) { return g.unary(e, v[0]); }, cpu);
}

// self (op) other, where other may be a wrapped Python number; alpha scales other (add/sub).
at::Tensor binary(const char* op, ExprOp e, const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha,
                  const CpuFn& cpu, bool comparison = false) {
  const auto dtype = comparison ? at::kBool : at::result_type(self, other);
  const bool true_div = e == ExprOp::Div && at::isIntegralType(dtype, true);
  const auto result = true_div ? at::kFloat : dtype;
  const double a = alpha.toDouble();
  if (auto words = int64_binary(op, e, self, other, a, result, cpu)) return *words;
  if (is_cpu_scalar(other)) {
    const double s = other.item().toDouble() * a;
    // Both go to record: the CPU fallback needs the scalar too; only device tensors get values.
    return record_elementwise(op, {self, other}, result, [&](Graph& g, const std::vector<int>& v) { return g.binary_scalar(e, v[0], s); }, cpu);
  }
  if (is_cpu_scalar(self)) {
    const double s = self.item().toDouble();
    return record_elementwise(op, {self, other}, result, [&](Graph& g, const std::vector<int>& v) {
      const int o = a == 1.0 ? v[0] : g.binary_scalar(ExprOp::Mul, v[0], a);
      return g.binary_scalar(e, o, s, /*scalar_first=*/true);
    }, cpu);
  }
  return record_elementwise(op, {self, other}, result, [&](Graph& g, const std::vector<int>& v) {
    const int o = a == 1.0 ? v[1] : g.binary_scalar(ExprOp::Mul, v[1], a);
    return g.binary(e, v[0], o);
  }, cpu);
}

// In-place: compute, then write the result into self's buffer (renamed if pending work reads it).
at::Tensor& inplace(at::Tensor& self, const at::Tensor& result) {
  self.copy_(result);
  return self;
}

#define VTPU_UNARY(name, expr, aten_call)                                                              \
  at::Tensor tpu_##name(const at::Tensor& self) {                                                            \
    return unary(#name, expr, self, [](const std::vector<at::Tensor>& c) { return aten_call(c[0]); }); \
  }
VTPU_UNARY(neg, ExprOp::Neg, at::neg)
VTPU_UNARY(exp, ExprOp::Exp, at::exp)
VTPU_UNARY(log, ExprOp::Log, at::log)
VTPU_UNARY(tanh, ExprOp::Tanh, at::tanh)
VTPU_UNARY(sigmoid, ExprOp::Sigmoid, at::sigmoid)
VTPU_UNARY(relu, ExprOp::Relu, at::relu)
VTPU_UNARY(silu, ExprOp::Silu, at::silu)
VTPU_UNARY(sqrt, ExprOp::Sqrt, at::sqrt)
VTPU_UNARY(rsqrt, ExprOp::Rsqrt, at::rsqrt)
VTPU_UNARY(abs, ExprOp::Abs, at::abs)
VTPU_UNARY(reciprocal, ExprOp::Reciprocal, at::reciprocal)
VTPU_UNARY(erf, ExprOp::Erf, at::erf)
VTPU_UNARY(sin, ExprOp::Sin, at::sin)
VTPU_UNARY(cos, ExprOp::Cos, at::cos)
#undef VTPU_UNARY

at::Tensor tpu_gelu(const at::Tensor& self, c10::string_view approximate) {
  const bool tanh = approximate == "tanh";
  const std::string approx(approximate);
  return unary("gelu", tanh ? ExprOp::GeluTanh : ExprOp::GeluErf, self,
               [approx](const std::vector<at::Tensor>& c) { return at::gelu(c[0], approx); });
}

// softplus(x) = log(1 + exp(beta x)) / beta, as max(beta x, 0) + log(1 + exp(-|beta x|)) so exp
// never overflows; x itself past the threshold, as torch. Where torch's log1p keeps the tiny
// values of very negative inputs, 1 + exp(-|beta x|) rounds to 1: an absolute error below 6e-8 / beta.
at::Tensor tpu_softplus(const at::Tensor& self, const at::Scalar& beta, const at::Scalar& threshold) {
  const double b = beta.toDouble(), t = threshold.toDouble();
  const auto cpu = [beta, threshold](const std::vector<at::Tensor>& c) { return at::softplus(c[0], beta, threshold); };
  if (!at::isFloatingType(self.scalar_type())) return run_on_cpu("softplus", {self}, cpu, "integer inputs");
  return record_elementwise("softplus", {self}, self.scalar_type(), [&](Graph& g, const std::vector<int>& v) {
    const int bx = g.binary_scalar(ExprOp::Mul, v[0], b);
    const int tail = g.unary(ExprOp::Log, g.binary_scalar(ExprOp::Add, g.unary(ExprOp::Exp, g.unary(ExprOp::Neg, g.unary(ExprOp::Abs, bx))), 1));
    const int soft = g.binary_scalar(ExprOp::Div, g.binary(ExprOp::Add, g.binary_scalar(ExprOp::Max, bx, 0), tail), b);
    return g.where(g.binary_scalar(ExprOp::Gt, bx, t), v[0], soft, "softplus");
  }, cpu);
}

#define VTPU_BINARY(name, expr, aten_call)                                                                  \
  at::Tensor tpu_##name(const at::Tensor& self, const at::Tensor& other) {                                        \
    return binary(#name, expr, self, other, 1, [](const std::vector<at::Tensor>& c) { return aten_call(c[0], c[1]); }); \
  }
VTPU_BINARY(mul, ExprOp::Mul, at::mul)
VTPU_BINARY(div, ExprOp::Div, at::div)
VTPU_BINARY(maximum, ExprOp::Max, at::maximum)
VTPU_BINARY(minimum, ExprOp::Min, at::minimum)
VTPU_BINARY(pow_tensor, ExprOp::Pow, at::pow)
#undef VTPU_BINARY

#define VTPU_COMPARE(name, expr, aten_call)                                                                            \
  at::Tensor tpu_##name(const at::Tensor& self, const at::Tensor& other) {                                                   \
    return binary(#name, expr, self, other, 1, [](const std::vector<at::Tensor>& c) { return aten_call(c[0], c[1]); }, true); \
  }                                                                                                                    \
  at::Tensor tpu_##name##_scalar(const at::Tensor& self, const at::Scalar& other) {                                    \
    return tpu_##name(self, wrapped_scalar(other));                                                          \
  }
VTPU_COMPARE(eq, ExprOp::Eq, at::eq)
VTPU_COMPARE(ne, ExprOp::Ne, at::ne)
VTPU_COMPARE(lt, ExprOp::Lt, at::lt)
VTPU_COMPARE(le, ExprOp::Le, at::le)
VTPU_COMPARE(gt, ExprOp::Gt, at::gt)
VTPU_COMPARE(ge, ExprOp::Ge, at::ge)
#undef VTPU_COMPARE

at::Tensor tpu_add(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  return binary("add", ExprOp::Add, self, other, alpha,
                [alpha](const std::vector<at::Tensor>& c) { return at::add(c[0], c[1], alpha); });
}
at::Tensor tpu_sub(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  return binary("sub", ExprOp::Sub, self, other, alpha,
                [alpha](const std::vector<at::Tensor>& c) { return at::sub(c[0], c[1], alpha); });
}
at::Tensor& tpu_add_(at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) { return inplace(self, tpu_add(self, other, alpha)); }
at::Tensor& tpu_sub_(at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) { return inplace(self, tpu_sub(self, other, alpha)); }
at::Tensor& tpu_mul_(at::Tensor& self, const at::Tensor& other) { return inplace(self, tpu_mul(self, other)); }
at::Tensor& tpu_div_(at::Tensor& self, const at::Tensor& other) { return inplace(self, tpu_div(self, other)); }

at::Tensor tpu_pow_scalar(const at::Tensor& self, const at::Scalar& exponent) {
  return tpu_pow_tensor(self, wrapped_scalar(exponent));
}

at::Tensor tpu_clamp(const at::Tensor& self, const std::optional<at::Scalar>& lo, const std::optional<at::Scalar>& hi) {
  const auto lo_v = lo ? std::optional<double>(lo->toDouble()) : std::nullopt;
  const auto hi_v = hi ? std::optional<double>(hi->toDouble()) : std::nullopt;
  return record_elementwise("clamp", {self}, self.scalar_type(), [&](Graph& g, const std::vector<int>& v) {
    int x = v[0];
    if (lo_v) x = g.binary_scalar(ExprOp::Max, x, *lo_v);
    if (hi_v) x = g.binary_scalar(ExprOp::Min, x, *hi_v);
    return x;
  }, [lo, hi](const std::vector<at::Tensor>& c) { return at::clamp(c[0], lo, hi); });
}

at::Tensor tpu_where(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other) {
  const auto dtype = at::result_type(self, other);
  const auto cpu = [](const std::vector<at::Tensor>& c) { return at::where(c[0], c[1], c[2]); };
  if (is_cpu_scalar(other) || is_cpu_scalar(self)) {  // scalars become device tensors of one element
    const auto dev = condition.device();
    return tpu_where(condition, is_cpu_scalar(self) ? self.to(dev, dtype) : self, is_cpu_scalar(other) ? other.to(dev, dtype) : other);
  }
  return record_elementwise("where", {condition, self, other}, dtype,
                            [&](Graph& g, const std::vector<int>& v) { return g.where(v[0], v[1], v[2]); }, cpu);
}

at::Tensor& tpu_where_out(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  return write_out(out, tpu_where(condition, self, other));
}

at::Tensor tpu_masked_fill(const at::Tensor& self, const at::Tensor& mask, const at::Scalar& value) {
  return tpu_where(mask, at::scalar_tensor(value, self.scalar_type()), self);
}
at::Tensor& tpu_masked_fill_(at::Tensor& self, const at::Tensor& mask, const at::Scalar& value) {
  return inplace(self, tpu_masked_fill(self, mask, value));
}

// torch.zeros / ones / full: a constant kernel writing self, which is never read (so a fresh
// tensor stays without HBM until the flush).
at::Tensor& tpu_fill_(at::Tensor& self, const at::Scalar& value) {
  fill_on_chip(self, value.toDouble());
  return self;
}
at::Tensor& tpu_zero_(at::Tensor& self) { return fill_(self, 0); }

// A [.., R, C] operand that is the transpose of a dense [.., C, R] tensor (a weight's .t(),
// k.transpose(-1, -2), a weight gradient's x.t()): the matmul reads the dense tensor with
// transpose_b (or transpose_a) instead of a transpose kernel making a copy first.
bool is_transposed_dense(const at::Tensor& b) {
  const int64_t d = b.dim();
  if (d < 2 || b.size(d - 1) == 1 || b.size(d - 2) == 1) return false;
  return b.stride(d - 2) == 1 && b.stride(d - 1) == b.size(d - 2) && b.transpose(-1, -2).is_contiguous();
}

at::Tensor matmul_op(const char* op, const at::Tensor& a, const at::Tensor& b, const CpuFn& cpu) {
  const bool a_transposed = is_transposed_dense(a), b_transposed = is_transposed_dense(b);
  const at::Tensor a_arg = a_transposed ? a.transpose(-1, -2) : a, b_arg = b_transposed ? b.transpose(-1, -2) : b;
  const int passes = kernels::passes_for_precision(Runtime::get().matmul_precision());
  const auto dtype = at::result_type(a, b);
  // The CPU path gets a and b as the caller gave them.
  const CpuFn cpu_given = [cpu, a_transposed, b_transposed](const std::vector<at::Tensor>& c) {
    return cpu({a_transposed ? c[0].transpose(-1, -2) : c[0], b_transposed ? c[1].transpose(-1, -2) : c[1]});
  };
  return record(op, {a_arg, b_arg}, dtype, [&](Graph& g, const std::vector<int>& v) {
    return g.matmul(v[0], v[1], b_transposed, passes, op, a_transposed);
  }, cpu_given);
}

at::Tensor tpu_mm(const at::Tensor& a, const at::Tensor& b) {
  return matmul_op("mm", a, b, [](const std::vector<at::Tensor>& c) { return at::mm(c[0], c[1]); });
}
at::Tensor& tpu_mm_out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) { return write_out(out, tpu_mm(a, b)); }
at::Tensor tpu_bmm(const at::Tensor& a, const at::Tensor& b) {
  return matmul_op("bmm", a, b, [](const std::vector<at::Tensor>& c) { return at::bmm(c[0], c[1]); });
}
at::Tensor tpu_addmm(const at::Tensor& bias, const at::Tensor& a, const at::Tensor& b, const at::Scalar& beta, const at::Scalar& alpha) {
  at::Tensor product = tpu_mm(a, b);
  if (alpha.toDouble() != 1.0) product = tpu_mul(product, wrapped_scalar(alpha));
  return tpu_add(product, bias, beta);  // beta scales the bias: (product) + beta * bias
}

bool last_dim(int64_t dim, int64_t ndim) { return dim == -1 || dim == ndim - 1; }

at::Tensor row_op(const char* op, RowOp r, const at::Tensor& self, const CpuFn& cpu, c10::ScalarType dtype,
                  std::vector<int64_t> out_shape = {}) {
  at::Tensor out = record(op, {self}, dtype, [&](Graph& g, const std::vector<int>& v) { return g.row(r, v[0]); }, cpu);
  return out_shape.empty() ? out : out.view(out_shape);
}

at::Tensor tpu_softmax(const at::Tensor& self, int64_t dim, bool half_to_float) {
  const auto cpu = [dim, half_to_float](const std::vector<at::Tensor>& c) { return at::_softmax(c[0], dim, half_to_float); };
  if (!last_dim(dim, self.dim())) return run_on_cpu("_softmax", {self}, cpu, "softmax over a dim other than the last");
  return row_op("_softmax", RowOp::Softmax, self, cpu, half_to_float ? at::kFloat : self.scalar_type());
}
at::Tensor tpu_log_softmax(const at::Tensor& self, int64_t dim, bool half_to_float) {
  const auto cpu = [dim, half_to_float](const std::vector<at::Tensor>& c) { return at::_log_softmax(c[0], dim, half_to_float); };
  if (!last_dim(dim, self.dim())) return run_on_cpu("_log_softmax", {self}, cpu, "log_softmax over a dim other than the last");
  return row_op("_log_softmax", RowOp::LogSoftmax, self, cpu, half_to_float ? at::kFloat : self.scalar_type());
}

// softmax whose rows of only -inf give zeros instead of NaN (what scaled_dot_product_attention
// runs, so fully masked rows stay finite): a row is fully masked when its max is -inf.
at::Tensor tpu_safe_softmax(const at::Tensor& self, int64_t dim, std::optional<c10::ScalarType> dtype) {
  const auto cpu = [dim, dtype](const std::vector<at::Tensor>& c) { return at::_safe_softmax(c[0], dim, dtype); };
  const auto out_dtype = dtype.value_or(self.scalar_type());
  if (!last_dim(dim, self.dim()) || self.dim() == 0) return run_on_cpu("_safe_softmax", {self}, cpu, "softmax over a dim other than the last");
  return record("_safe_softmax", {self}, out_dtype, [&](Graph& g, const std::vector<int>& v) {
    auto column = g.node(v[0]).type.shape;
    column.back() = 1;
    const int max = g.reshape(g.row(RowOp::Max, v[0]), column);
    const int masked = g.binary_scalar(ExprOp::Eq, max, -std::numeric_limits<double>::infinity());
    const int probs = g.row(RowOp::Softmax, v[0]);
    return g.where(masked, g.full({{1}, g.node(probs).type.dtype}, 0, "_safe_softmax"), probs, "_safe_softmax");
  }, cpu);
}

// sum / mean / amax / amin over any dims (none given: all). The reduced dims are permuted last on the
// chip when needed (see reduce_dims); integer sums run when f32 accumulation is exact for them
// (int64_sum), other integer reductions fall back.
at::Tensor reduce(const char* op, RowOp r, const at::Tensor& self, at::OptionalIntArrayRef dims_opt, bool keepdim,
                  const CpuFn& cpu, int64_t correction = 1) {
  const auto [dims, shape] = reduction_over(self, dims_opt, keepdim);
  if (self.numel() == 0) return cpu({self.cpu()}).to(self.device());  // nothing to reduce on the chip
  if (at::isIntegralType(self.scalar_type(), true)) {
    if (r == RowOp::Sum && self.dim() > 0) {
      if (auto counted = int64_sum(self, dims, cpu)) return counted->view(shape);
    }
    return run_on_cpu(op, {self}, cpu, "integer reductions of unknown magnitude (sums of bool, int8 and small int64 run)");
  }
  if (self.dim() == 0) return run_on_cpu(op, {self}, cpu, "reductions of 0-dim tensors");
  at::Tensor out = record(op, {self}, self.scalar_type(), [&](Graph& g, const std::vector<int>& v) {
    return kernels::reduce_dims(g, v[0], dims, r, correction);
  }, cpu);
  return out.view(shape);
}

at::Tensor tpu_sum_dim(const at::Tensor& self, at::OptionalIntArrayRef dims, bool keepdim, std::optional<c10::ScalarType> dtype) {
  std::vector<int64_t> d;
  if (dims) d.assign(dims->begin(), dims->end());
  const auto cpu = [d, keepdim, dtype](const std::vector<at::Tensor>& c) { return at::sum(c[0], d, keepdim, dtype); };
  // Integer sums are int64 anyway; other dtype arguments change the accumulation.
  const bool int64_anyway = dtype == at::kLong && at::isIntegralType(self.scalar_type(), true);
  if (dtype && *dtype != self.scalar_type() && !int64_anyway) return run_on_cpu("sum", {self}, cpu, "a sum with a dtype argument");
  return reduce("sum", RowOp::Sum, self, dims, keepdim, cpu);
}
at::Tensor tpu_mean_dim(const at::Tensor& self, at::OptionalIntArrayRef dims, bool keepdim, std::optional<c10::ScalarType> dtype) {
  std::vector<int64_t> d;
  if (dims) d.assign(dims->begin(), dims->end());
  const auto cpu = [d, keepdim, dtype](const std::vector<at::Tensor>& c) { return at::mean(c[0], d, keepdim, dtype); };
  if (dtype && *dtype != self.scalar_type()) return run_on_cpu("mean", {self}, cpu, "a mean with a dtype argument");
  return reduce("mean", RowOp::Mean, self, dims, keepdim, cpu);
}
at::Tensor tpu_amax(const at::Tensor& self, at::IntArrayRef dims, bool keepdim) {
  std::vector<int64_t> d(dims.begin(), dims.end());
  return reduce("amax", RowOp::Max, self, dims, keepdim,
                     [d, keepdim](const std::vector<at::Tensor>& c) { return at::amax(c[0], d, keepdim); });
}
at::Tensor tpu_amin(const at::Tensor& self, at::IntArrayRef dims, bool keepdim) {
  std::vector<int64_t> d(dims.begin(), dims.end());
  return reduce("amin", RowOp::Min, self, dims, keepdim,
                [d, keepdim](const std::vector<at::Tensor>& c) { return at::amin(c[0], d, keepdim); });
}

// prod over one dim or everything (a row kernel's product, kernels/generators/rowwise.h). Integer products
// (int64 in torch, of any size) and a dtype argument that changes the accumulation fall back.
at::Tensor tpu_prod_dim(const at::Tensor& self, int64_t dim, bool keepdim, std::optional<c10::ScalarType> dtype) {
  const auto cpu = [dim, keepdim, dtype](const std::vector<at::Tensor>& c) { return at::prod(c[0], dim, keepdim, dtype); };
  if (dtype && *dtype != self.scalar_type()) return run_on_cpu("prod", {self}, cpu, "a product with a dtype argument");
  return reduce("prod", RowOp::Prod, self, std::vector<int64_t>{dim}, keepdim, cpu);
}
at::Tensor tpu_prod(const at::Tensor& self, std::optional<c10::ScalarType> dtype) {
  const auto cpu = [dtype](const std::vector<at::Tensor>& c) { return at::prod(c[0], dtype); };
  if (dtype && *dtype != self.scalar_type()) return run_on_cpu("prod", {self}, cpu, "a product with a dtype argument");
  return reduce("prod", RowOp::Prod, self, std::nullopt, false, cpu);
}
at::Tensor& tpu_prod_out(const at::Tensor& self, int64_t dim, bool keepdim, std::optional<c10::ScalarType> dtype, at::Tensor& out) {
  return write_out(out, tpu_prod_dim(self, dim, keepdim, dtype));
}

// var / var_mean over any dims with an integer correction (Bessel's by default); group norm
// reaches the chip through var_mean.
at::Tensor tpu_var(const at::Tensor& self, at::OptionalIntArrayRef dims, const std::optional<at::Scalar>& correction,
                   bool keepdim) {
  std::vector<int64_t> d;
  if (dims) d.assign(dims->begin(), dims->end());
  const auto cpu = [d, dims_given = dims.has_value(), correction, keepdim](const std::vector<at::Tensor>& c) {
    return at::var(c[0], dims_given ? at::OptionalIntArrayRef(d) : std::nullopt, correction, keepdim);
  };
  const double corr = correction ? correction->toDouble() : 1.0;
  if (corr != static_cast<double>(static_cast<int64_t>(corr))) return run_on_cpu("var", {self}, cpu, "a fractional correction");
  return reduce("var", RowOp::Var, self, dims, keepdim, cpu, static_cast<int64_t>(corr));
}

// std = sqrt(var): the square root fuses into the variance kernel's consumers.
at::Tensor tpu_std(const at::Tensor& self, at::OptionalIntArrayRef dims, const std::optional<at::Scalar>& correction,
                   bool keepdim) {
  return tpu_sqrt(tpu_var(self, dims, correction, keepdim));
}

std::tuple<at::Tensor, at::Tensor> tpu_var_mean(const at::Tensor& self, at::OptionalIntArrayRef dims,
                                                const std::optional<at::Scalar>& correction, bool keepdim) {
  std::vector<int64_t> d;
  if (dims) d.assign(dims->begin(), dims->end());
  else for (int64_t i = 0; i < self.dim(); ++i) d.push_back(i);
  const auto mean_cpu = [d, keepdim](const std::vector<at::Tensor>& c) { return at::mean(c[0], d, keepdim); };
  return {tpu_var(self, dims, correction, keepdim), reduce("mean", RowOp::Mean, self, dims, keepdim, mean_cpu)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> tpu_native_layer_norm(const at::Tensor& input, at::IntArrayRef normalized_shape,
                                                                 const std::optional<at::Tensor>& weight,
                                                                 const std::optional<at::Tensor>& bias, double eps) {
  std::vector<int64_t> ns(normalized_shape.begin(), normalized_shape.end());
  if (ns.size() != 1) {
    TORCH_CHECK_NOT_IMPLEMENTED(Runtime::get().cpu_fallback_allowed(),
                                "vtpu: aten::native_layer_norm over more than the last dim is not lowered; set VTPU_CPU_FALLBACK=1");
    auto r = at::native_layer_norm(input.cpu(), ns, weight ? std::optional(weight->cpu()) : std::nullopt,
                                   bias ? std::optional(bias->cpu()) : std::nullopt, eps);
    return {std::get<0>(r).to(input.device()), std::get<1>(r).to(input.device()), std::get<2>(r).to(input.device())};
  }
  const bool has_w = weight && weight->defined(), has_b = bias && bias->defined();
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
  at::Tensor mean = record("native_layer_norm", inputs, at::kFloat, [&](Graph& g, const std::vector<int>& v) {
    return g.row(RowOp::Mean, v[0]);
  }, cpu_out(1)).view(stat_shape);
  at::Tensor rstd = record("native_layer_norm", inputs, at::kFloat, [&](Graph& g, const std::vector<int>& v) {
    const int var = g.row(RowOp::Var, v[0], -1, -1, eps, "var", /*correction=*/0);
    return g.unary(ExprOp::Rsqrt, g.binary_scalar(ExprOp::Add, var, eps));
  }, cpu_out(2)).view(stat_shape);
  return {out, mean, rstd};
}

at::Tensor tpu_sum(const at::Tensor& self, std::optional<c10::ScalarType> dtype) {
  return tpu_sum_dim(self, std::nullopt, false, dtype);
}
at::Tensor tpu_mean(const at::Tensor& self, std::optional<c10::ScalarType> dtype) {
  return tpu_mean_dim(self, std::nullopt, false, dtype);
}

at::Tensor tpu_cat(const at::ITensorListRef& tensors, int64_t dim) {
  std::vector<at::Tensor> inputs;
  for (const auto& t : tensors) {
    if (t.numel() > 0 || t.dim() > 1) inputs.push_back(t);  // torch skips legacy empty 1-d tensors
  }
  TORCH_CHECK(!inputs.empty(), "vtpu: cat of no tensors");
  const int64_t d = at::maybe_wrap_dim(dim, inputs[0].dim());
  c10::ScalarType dtype = inputs[0].scalar_type();
  for (const auto& t : inputs) dtype = c10::promoteTypes(dtype, t.scalar_type());
  return record("cat", inputs, dtype, [&](Graph& g, const std::vector<int>& v) {
    std::vector<int> cast;
    for (int x : v) cast.push_back(g.node(x).type.dtype == to_kernel_dtype(dtype) ? x : g.cast(x, to_kernel_dtype(dtype)));
    return g.concat(cast, d);
  }, [d](const std::vector<at::Tensor>& c) { return at::cat(c, d); });
}

// index_select (what nn.Embedding lowers to): a gather kernel reads the indices on the chip.
// int64 indices are handed over as their int32 word pairs (a view of the same bytes); an index
// outside the table raises IndexError at the next synchronisation, like a device-side assert on
// other accelerators. Other dims are moved first and back after (strided copies on the chip).
at::Tensor tpu_index_select(const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  TORCH_CHECK_INDEX(index.dim() <= 1, "index_select(): Index is supposed to be a vector");
  const int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  const CpuFn cpu = [d, index](const std::vector<at::Tensor>& c) { return at::index_select(c[0], d, index.cpu()); };
  const bool i64 = index.scalar_type() == at::kLong;
  TORCH_CHECK_INDEX(i64 || index.scalar_type() == at::kInt, "index_select(): Expected dtype int32 or int64 for index");
  if (self.dim() == 0) return run_on_cpu("index_select", {self}, cpu, "a 0-d input");
  if (d != 0) return tpu_index_select(self.movedim(d, 0), 0, index).movedim(0, d).contiguous();
  if (!index.device().is_privateuseone()) return run_on_cpu("index_select", {self}, cpu, "indices on the CPU");
  return record("index_select", {self, index_words(index)}, self.scalar_type(), [&](Graph& g, const std::vector<int>& v) {
    return g.gather(v[0], v[1], i64);
  }, cpu);
}

// x[..., idx, ...] with one integer index tensor (the others None): a gather of the indexed dim
// moved first, negative indices counting from the end as torch's indexing has them (checked on
// the chip: out of range traps). Result dims: x's before the index, the index's, x's after.
// Boolean masks (a data-dependent shape), several index tensors and 0-d inputs run on the CPU.
at::Tensor tpu_index(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices) {
  const std::vector<std::optional<at::Tensor>> list(indices.begin(), indices.end());
  const CpuFn cpu = [list](const std::vector<at::Tensor>& c) {
    c10::List<std::optional<at::Tensor>> host;
    for (const auto& i : list) host.push_back(i && i->defined() ? std::optional(i->cpu()) : std::nullopt);
    return at::index(c[0], host);
  };
  int64_t d = -1, given = 0;
  for (size_t k = 0; k < list.size(); ++k) {
    if (list[k] && list[k]->defined()) {
      d = static_cast<int64_t>(k);
      ++given;
    }
  }
  if (given != 1 || self.dim() == 0) return run_on_cpu("index", {self}, cpu, "several index tensors, or none, or a 0-d input");
  const at::Tensor& idx = *list[d];
  if (idx.scalar_type() == at::kBool && d + idx.dim() <= self.dim()) {
    // x[..., mask, ...]: the masked dims moved first, the count read, rows gathered, and the
    // selected elements' dim put back where the mask was (torch's place for one index tensor).
    std::vector<int64_t> from(idx.dim()), to(idx.dim());
    for (int64_t k = 0; k < idx.dim(); ++k) {
      from[k] = d + k;
      to[k] = k;
    }
    const at::Tensor moved = d == 0 ? self : self.movedim(from, to);
    if (auto rows = masked_rows(moved, idx.device() == self.device() ? idx : idx.to(self.device()))) {
      return d == 0 ? *rows : rows->movedim(0, d).contiguous();
    }
  }
  if (idx.scalar_type() != at::kLong && idx.scalar_type() != at::kInt) {
    return run_on_cpu("index", {self}, cpu, "boolean masks of another shape than the dims they index, or past the compaction limit");
  }
  const at::Tensor index = idx.device() == self.device() ? idx : idx.to(self.device());
  const at::Tensor moved = self.movedim(d, 0);
  const at::Tensor flat = index.reshape({-1});
  std::vector<int64_t> shape = index.sizes().vec();
  shape.insert(shape.end(), moved.sizes().begin() + 1, moved.sizes().end());
  const at::Tensor picked = record("index", {moved, index_words(flat)}, self.scalar_type(), [&](Graph& g, const std::vector<int>& v) {
    return g.gather(v[0], v[1], flat.scalar_type() == at::kLong, "index", /*wrap_negative=*/true);
  }, [moved, flat](const std::vector<at::Tensor>&) {  // the gather's own result: [indices, rest]
    return at::index(moved.cpu(), c10::List<std::optional<at::Tensor>>({std::optional(flat.cpu())}));
  }).view(shape);
  if (d == 0) return picked;
  std::vector<int64_t> from(index.dim()), to(index.dim());
  for (int64_t k = 0; k < index.dim(); ++k) {
    from[k] = k;
    to[k] = d + k;
  }
  return picked.movedim(from, to).contiguous();
}
at::Tensor& tpu_index_out(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices, at::Tensor& out) {
  return write_out(out, tpu_index(self, indices));
}

// Constant padding: per padded dim, constant blocks concatenated around the input (cat kernels);
// negative pads crop (a convolution's padding='same' backward), one strided copy after.
at::Tensor tpu_constant_pad_nd(const at::Tensor& self, at::IntArrayRef pad, const at::Scalar& value) {
  const std::vector<int64_t> p(pad.begin(), pad.end());
  const auto cpu = [p, value](const std::vector<at::Tensor>& c) { return at::constant_pad_nd(c[0], p, value); };
  bool malformed = p.size() % 2 || int64_t(p.size()) > 2 * self.dim();
  for (size_t i = 0; !malformed && i < p.size() / 2; ++i) malformed |= self.size(self.dim() - 1 - i) + p[2 * i] + p[2 * i + 1] <= 0;
  if (malformed) return run_on_cpu("constant_pad_nd", {self}, cpu, "malformed padding, or cropping everything");
  const double fill = value.toDouble();
  return record("constant_pad_nd", {self}, self.scalar_type(), [&](Graph& g, const std::vector<int>& v) {
    int x = v[0];
    for (size_t i = 0; i < p.size() / 2; ++i) {
      x = g.pad(x, self.dim() - 1 - static_cast<int64_t>(i), std::max<int64_t>(p[2 * i], 0), std::max<int64_t>(p[2 * i + 1], 0), fill);
    }
    std::vector<int64_t> sizes = g.node(x).type.shape, strides(sizes.size(), 1);
    for (size_t d = sizes.size(); d-- > 1;) strides[d - 1] = strides[d] * sizes[d];
    int64_t offset = 0;
    bool cropping = false;
    for (size_t i = 0; i < p.size() / 2; ++i) {
      const size_t d = sizes.size() - 1 - i;
      const int64_t before = std::min<int64_t>(p[2 * i], 0), after = std::min<int64_t>(p[2 * i + 1], 0);
      offset -= before * strides[d];
      sizes[d] += before + after;
      cropping |= before < 0 || after < 0;
    }
    return cropping ? g.strided_copy(x, sizes, strides, offset, "crop") : x;
  }, cpu);
}

// Batch norm with running statistics (eval mode) is elementwise per channel (dim 1):
// (x - mean) * rsqrt(var + eps) * weight + bias. Training mode (batch statistics) runs on the CPU
// when allowed; its schema does not mark the running statistics as written, so torch's boxed
// fallback would drop their update: they are copied back here.
std::tuple<at::Tensor, at::Tensor, at::Tensor> batch_norm_on_cpu(
    const at::Tensor& input, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var, bool training,
    double momentum, double eps) {
  const auto host = [](const std::optional<at::Tensor>& t) -> std::optional<at::Tensor> {
    if (!t || !t->defined()) return std::nullopt;
    return t->to(at::kCPU);
  };
  std::optional<at::Tensor> mean = host(running_mean), var = host(running_var);
  const auto r = run_on_cpu_outputs("native_batch_norm", {input}, [&](const std::vector<at::Tensor>& c) {
    auto [out, save_mean, save_invstd] = at::native_batch_norm(c[0], host(weight), host(bias), mean, var, training, momentum, eps);
    return std::vector<at::Tensor>{out, save_mean, save_invstd};
  }, "batch statistics (training mode)");
  if (mean) running_mean->copy_(*mean);
  if (var) running_var->copy_(*var);
  return {r[0], r[1], r[2]};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> tpu_native_batch_norm(
    const at::Tensor& input, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var, bool training,
    double momentum, double eps) {
  const bool has_stats = running_mean && running_mean->defined() && running_var && running_var->defined();
  if (training || !has_stats || input.dim() < 2) {
    return batch_norm_on_cpu(input, weight, bias, running_mean, running_var, training, momentum, eps);
  }
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
// flat, which a permuted input (an elementwise result in channels-last order) cannot give.
std::tuple<at::Tensor, at::Tensor, at::Tensor> tpu_native_group_norm(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                                                                     const std::optional<at::Tensor>& bias, int64_t n, int64_t c,
                                                                     int64_t hxw, int64_t group, double eps) {
  return at::native::math_group_norm(input.contiguous(), weight, bias, n, c, hxw, group, eps);
}

// torch's clone: preserve_format keeps a dense tensor's strides (the copy runs in its dim order).
at::Tensor tpu_clone(const at::Tensor& self, std::optional<c10::MemoryFormat> format) {
  at::Tensor out = at::empty_like(self, self.options(), format);
  out.copy_(self);
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("neg", tpu_neg);
  m.impl("exp", tpu_exp);
  m.impl("log", tpu_log);
  m.impl("tanh", tpu_tanh);
  m.impl("sigmoid", tpu_sigmoid);
  m.impl("relu", tpu_relu);
  m.impl("silu", tpu_silu);
  m.impl("sqrt", tpu_sqrt);
  m.impl("rsqrt", tpu_rsqrt);
  m.impl("abs", tpu_abs);
  m.impl("reciprocal", tpu_reciprocal);
  m.impl("erf", tpu_erf);
  m.impl("sin", tpu_sin);
  m.impl("cos", tpu_cos);
  m.impl("gelu", tpu_gelu);
  m.impl("softplus", tpu_softplus);
  m.impl("add.Tensor", tpu_add);
  m.impl("sub.Tensor", tpu_sub);
  m.impl("mul.Tensor", tpu_mul);
  m.impl("div.Tensor", tpu_div);
  m.impl("add_.Tensor", tpu_add_);
  m.impl("sub_.Tensor", tpu_sub_);
  m.impl("mul_.Tensor", tpu_mul_);
  m.impl("div_.Tensor", tpu_div_);
  m.impl("maximum", tpu_maximum);
  m.impl("minimum", tpu_minimum);
  m.impl("pow.Tensor_Tensor", tpu_pow_tensor);
  m.impl("pow.Tensor_Scalar", tpu_pow_scalar);
  m.impl("clamp", tpu_clamp);
  m.impl("eq.Tensor", tpu_eq);
  m.impl("ne.Tensor", tpu_ne);
  m.impl("lt.Tensor", tpu_lt);
  m.impl("le.Tensor", tpu_le);
  m.impl("gt.Tensor", tpu_gt);
  m.impl("ge.Tensor", tpu_ge);
  m.impl("eq.Scalar", tpu_eq_scalar);
  m.impl("ne.Scalar", tpu_ne_scalar);
  m.impl("lt.Scalar", tpu_lt_scalar);
  m.impl("le.Scalar", tpu_le_scalar);
  m.impl("gt.Scalar", tpu_gt_scalar);
  m.impl("ge.Scalar", tpu_ge_scalar);
  m.impl("where.self", tpu_where);
  m.impl("where.self_out", tpu_where_out);
  m.impl("masked_fill.Scalar", tpu_masked_fill);
  m.impl("masked_fill_.Scalar", tpu_masked_fill_);
  m.impl("fill_.Scalar", tpu_fill_);
  m.impl("zero_", tpu_zero_);
  m.impl("mm", tpu_mm);
  m.impl("mm.out", tpu_mm_out);
  m.impl("bmm", tpu_bmm);
  m.impl("addmm", tpu_addmm);
  m.impl("_softmax", tpu_softmax);
  m.impl("_log_softmax", tpu_log_softmax);
  m.impl("_safe_softmax", tpu_safe_softmax);
  m.impl("sum.dim_IntList", tpu_sum_dim);
  m.impl("prod.dim_int", tpu_prod_dim);
  m.impl("prod", tpu_prod);
  m.impl("prod.int_out", tpu_prod_out);
  m.impl("mean.dim", tpu_mean_dim);
  m.impl("amax", tpu_amax);
  m.impl("amin", tpu_amin);
  m.impl("var.correction", tpu_var);
  m.impl("std.correction", tpu_std);
  m.impl("var_mean.correction", tpu_var_mean);
  m.impl("sum", tpu_sum);
  m.impl("mean", tpu_mean);
  m.impl("native_layer_norm", tpu_native_layer_norm);
  m.impl("clone", tpu_clone);
  m.impl("cat", tpu_cat);
  m.impl("index_select", tpu_index_select);
  m.impl("index.Tensor", tpu_index);
  m.impl("index.Tensor_out", tpu_index_out);
  m.impl("constant_pad_nd", tpu_constant_pad_nd);
  m.impl("native_batch_norm", tpu_native_batch_norm);
  m.impl("native_group_norm", tpu_native_group_norm);
}

}  // namespace vtpu::bridge
