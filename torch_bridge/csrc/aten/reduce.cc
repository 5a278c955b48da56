// Reductions and row kernels on the chip: softmax, log_softmax and the masked-row-safe softmax,
// sum / mean / amax / amin / prod over any dims, var / std / var_mean.
#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>

#include <limits>
#include <optional>

#include <torch/library.h>

#include "kernels/compose/reduce_dims.h"
#include "kernels/generators/row_spec.h"
#include "torch_bridge/csrc/aten/complex.h"
#include "torch_bridge/csrc/aten/int64.h"
#include "torch_bridge/csrc/aten/pointwise.h"
#include "torch_bridge/csrc/aten/variants.h"
#include "torch_bridge/csrc/record/op_support.h"

namespace vtpu::bridge {
namespace {

using kernels::ExprOp;
using kernels::Graph;
using kernels::RowOp;

bool last_dim(int64_t dim, int64_t ndim) { return dim == -1 || dim == ndim - 1; }

at::Tensor row_op(const char* op, RowOp r, const at::Tensor& self, const CpuFn& cpu, c10::ScalarType dtype,
                  std::vector<int64_t> out_shape = {}) {
  at::Tensor out = record(op, {self}, dtype, [&](Graph& g, const std::vector<int>& v) { return g.row(r, v[0]); }, cpu);
  return out_shape.empty() ? out : out.view(out_shape);
}

// The row kernels run along the last dim: a softmax over another dim moves it last (a layout copy
// on the chip) and back; a 0-dim tensor is one row of one element.
template <typename Op>
std::optional<at::Tensor> along_last_dim(const at::Tensor& self, int64_t dim, const Op& op) {
  if (self.dim() == 0) return op(self.reshape({1})).reshape({});
  if (last_dim(dim, self.dim())) return std::nullopt;
  const int64_t d = at::maybe_wrap_dim(dim, self.dim());
  return op(self.transpose(d, -1)).transpose(d, -1);
}

// Rows longer than a row kernel takes (Llama 3's 128,256-entry vocabulary) as their parts: the
// row maximum and the sum of exponentials are long reductions, which compose from row kernels
// over pieces of the row (kernels/compose/reduce_dims.h). In f32, as torch's kernels compute.
at::Tensor long_row_softmax(const at::Tensor& self, bool log, bool half_to_float) {
  const at::Tensor x = self.to(at::kFloat);
  const at::Tensor shifted = x - x.amax(-1, true);
  const at::Tensor e = shifted.exp();
  const at::Tensor out = log ? shifted - e.sum(-1, true).log() : e / e.sum(-1, true);
  return out.to(half_to_float ? at::kFloat : self.scalar_type());
}

bool longer_than_a_row_kernel_takes(const at::Tensor& self) { return self.size(-1) > kernels::kMaxRowCols; }

at::Tensor tpu_softmax(const at::Tensor& self, int64_t dim, bool half_to_float) {
  if (auto moved = along_last_dim(self, dim, [&](const at::Tensor& x) { return tpu_softmax(x, -1, half_to_float); })) return *moved;
  if (longer_than_a_row_kernel_takes(self)) return long_row_softmax(self, false, half_to_float);
  const auto cpu = [dim, half_to_float](const std::vector<at::Tensor>& c) { return at::_softmax(c[0], dim, half_to_float); };
  return row_op("_softmax", RowOp::Softmax, self, cpu, half_to_float ? at::kFloat : self.scalar_type());
}
at::Tensor tpu_log_softmax(const at::Tensor& self, int64_t dim, bool half_to_float) {
  if (auto moved = along_last_dim(self, dim, [&](const at::Tensor& x) { return tpu_log_softmax(x, -1, half_to_float); })) return *moved;
  if (longer_than_a_row_kernel_takes(self)) return long_row_softmax(self, true, half_to_float);
  const auto cpu = [dim, half_to_float](const std::vector<at::Tensor>& c) { return at::_log_softmax(c[0], dim, half_to_float); };
  return row_op("_log_softmax", RowOp::LogSoftmax, self, cpu, half_to_float ? at::kFloat : self.scalar_type());
}

// softmax whose rows of only -inf give zeros instead of NaN (what scaled_dot_product_attention
// runs, so fully masked rows stay finite): a row is fully masked when its max is -inf.
at::Tensor tpu_safe_softmax(const at::Tensor& self, int64_t dim, std::optional<c10::ScalarType> dtype) {
  const auto cpu = [dim, dtype](const std::vector<at::Tensor>& c) { return at::_safe_softmax(c[0], dim, dtype); };
  const auto out_dtype = dtype.value_or(self.scalar_type());
  if (auto moved = along_last_dim(self, dim, [&](const at::Tensor& x) { return tpu_safe_softmax(x, -1, dtype); })) return *moved;
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
// (int64_sum), integer max/min at any magnitude (integer_extreme), other integer reductions fall back.
at::Tensor reduce(const char* op, RowOp r, const at::Tensor& self, at::OptionalIntArrayRef dims_opt, bool keepdim,
                  const CpuFn& cpu, int64_t correction = 1) {
  const auto [dims, shape] = reduction_over(self, dims_opt, keepdim);
  if (self.numel() == 0) return cpu({self.cpu()}).to(self.device());  // nothing to reduce on the chip
  if (self.dim() == 0) {  // one element: reduced as a 1-element row, whatever dims and keepdim say
    return reduce(op, r, self.reshape({1}), at::IntArrayRef{0}, false, cpu, correction).reshape({});
  }
  if (self.scalar_type() == at::kComplexFloat && (r == RowOp::Sum || r == RowOp::Mean)) {  // each plane on its own
    return complex::linear(self, [&](const at::Tensor& p) { return reduce(op, r, p, dims_opt, keepdim, cpu); });
  }
  if (self.scalar_type() == at::kComplexFloat && r == RowOp::Prod) {  // one dim (prod's overloads), or all flattened
    return dims_opt ? complex::product(self, at::maybe_wrap_dim(dims_opt->front(), self.dim()), keepdim)
                    : complex::product(self.reshape({-1}), 0, false);
  }
  if (self.scalar_type() == at::kComplexFloat && r == RowOp::Var) {  // E|z - mean|^2: the planes' variances, summed
    const at::Tensor pairs = complex::as_pairs(self);
    const auto plane = [&](int part) { return reduce(op, r, pairs.select(-1, part), dims_opt, keepdim, cpu, correction); };
    return at::add(plane(0), plane(1));
  }
  if (at::isIntegralType(self.scalar_type(), true)) {
    if (r == RowOp::Sum) {
      if (auto counted = int64_sum(self, dims, cpu)) return counted->view(shape);
    }
    if (r == RowOp::Max || r == RowOp::Min) return integer_extreme(op, self, dims, r == RowOp::Max, false, cpu).reshape(shape);
    return run_on_cpu(op, {self}, cpu, "integer sums and means of unknown magnitude (sums of bool, int8, uint8 and small int64 run)");
  }
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
  if (dtype && *dtype != at::kLong && *dtype != at::kBool && at::isIntegralType(*dtype, false) &&
      at::isIntegralType(self.scalar_type(), true)) {
    // torch sums in the integer dtype asked for (tensordot's sum of int32 products), wrapping: the
    // exact int64 sum's low bits
    return reduce("sum", RowOp::Sum, self, dims, keepdim, cpu).to(*dtype);
  }
  if (dtype && *dtype != self.scalar_type() && !int64_anyway) {
    // a float dtype over a float input: the CPU converts first, then sums (in f32 either way here);
    // bools count exactly in f32 below 2^24 elements
    const bool exact = is_chip_float(self.scalar_type()) || (self.scalar_type() == at::kBool && self.numel() < (1 << 24));
    if (is_chip_float(*dtype) && exact) return tpu_sum_dim(self.to(*dtype), dims, keepdim, std::nullopt);
    return run_on_cpu("sum", {self}, cpu, "a sum with a dtype argument");
  }
  return reduce("sum", RowOp::Sum, self, dims, keepdim, cpu);
}
at::Tensor tpu_mean_dim(const at::Tensor& self, at::OptionalIntArrayRef dims, bool keepdim, std::optional<c10::ScalarType> dtype) {
  std::vector<int64_t> d;
  if (dims) d.assign(dims->begin(), dims->end());
  const auto cpu = [d, keepdim, dtype](const std::vector<at::Tensor>& c) { return at::mean(c[0], d, keepdim, dtype); };
  if (dtype && *dtype != self.scalar_type()) {
    if (is_chip_float(*dtype) && is_chip_float(self.scalar_type())) return tpu_mean_dim(self.to(*dtype), dims, keepdim, std::nullopt);
    return run_on_cpu("mean", {self}, cpu, "a mean with a dtype argument");
  }
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
  return pointwise::sqrt(tpu_var(self, dims, correction, keepdim));
}

std::tuple<at::Tensor, at::Tensor> tpu_var_mean(const at::Tensor& self, at::OptionalIntArrayRef dims,
                                                const std::optional<at::Scalar>& correction, bool keepdim) {
  std::vector<int64_t> d;
  if (dims) d.assign(dims->begin(), dims->end());
  else for (int64_t i = 0; i < self.dim(); ++i) d.push_back(i);
  const auto mean_cpu = [d, keepdim](const std::vector<at::Tensor>& c) { return at::mean(c[0], d, keepdim); };
  return {tpu_var(self, dims, correction, keepdim), reduce("mean", RowOp::Mean, self, dims, keepdim, mean_cpu)};
}

at::Tensor tpu_sum(const at::Tensor& self, std::optional<c10::ScalarType> dtype) {
  return tpu_sum_dim(self, std::nullopt, false, dtype);
}
at::Tensor tpu_mean(const at::Tensor& self, std::optional<c10::ScalarType> dtype) {
  return tpu_mean_dim(self, std::nullopt, false, dtype);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_softmax", tpu_softmax);
  m.impl("_log_softmax", tpu_log_softmax);
  m.impl("_safe_softmax", tpu_safe_softmax);
  m.impl("sum.dim_IntList", tpu_sum_dim);
  m.impl("prod.dim_int", tpu_prod_dim);
  m.impl("prod", tpu_prod);
  m.impl("prod.int_out", Variants<tpu_prod_dim>::out);
  m.impl("mean.dim", tpu_mean_dim);
  m.impl("amax", tpu_amax);
  m.impl("amin", tpu_amin);
  m.impl("var.correction", tpu_var);
  m.impl("std.correction", tpu_std);
  m.impl("var_mean.correction", tpu_var_mean);
  m.impl("sum", tpu_sum);
  m.impl("mean", tpu_mean);
}

}  // namespace vtpu::bridge
