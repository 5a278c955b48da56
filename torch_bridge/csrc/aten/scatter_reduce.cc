// scatter_reduce and index_reduce on the chip, from the scatter kernels (gather_scatter.cc).
// 'sum' is a scatter_add into self, or into self with the scattered positions zeroed when
// include_self is false; 'mean' divides it by how many values each position took (itself when
// included, plus every source value scattered there). 'amax', 'amin' and 'prod' scatter src
// into the combine's identity (kernels/generators/scatter_add.h) and combine that with self;
// without include_self, positions that took a value keep only the scattered result. NaN
// propagates as on the CPU (the chip's max and min do). index_reduce is scatter_reduce with its
// 1-D index spread along `dim` over the source's shape.
#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>
#include <torch/library.h>

#include "torch_bridge/csrc/aten/gather_scatter.h"
#include "torch_bridge/csrc/aten/variants.h"
#include "torch_bridge/csrc/record/op_support.h"

namespace vtpu::bridge {
namespace {

using kernels::ExprOp;

// How often each of self's elements is named by index along dim.
at::Tensor hit_counts(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src) {
  return at::zeros_like(self).scatter_add(dim, index, at::ones_like(src, self.options()));
}

// amax, amin, prod; undefined with `why` set when the chip cannot.
at::Tensor combined(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src, const std::string& op,
                    bool include_self, std::string& why) {
  const ExprOp combine = op == "amax" ? ExprOp::Max : op == "amin" ? ExprOp::Min : ExprOp::Mul;
  const at::Tensor scattered = scatter_combined(self, dim, index, src, combine, why);
  if (!why.empty()) return {};
  if (!include_self) return at::where(hit_counts(self, dim, index, src) > 0, scattered, self);
  // untouched positions hold the identity, so combining keeps self there
  return op == "amax" ? at::maximum(self, scattered) : op == "amin" ? at::minimum(self, scattered) : self * scattered;
}

at::Tensor tpu_scatter_reduce(const at::Tensor& self, int64_t dim_arg, const at::Tensor& index, const at::Tensor& src,
                              c10::string_view reduce, bool include_self) {
  const std::string op(reduce);
  const int64_t dim = at::maybe_wrap_dim(dim_arg, std::max<int64_t>(self.dim(), 1));
  std::string why;
  at::Tensor result;
  if (op == "mean" && !at::isFloatingType(self.scalar_type())) why = "an integer 'mean' (torch floors it)";
  else if (op == "amax" || op == "amin" || op == "prod") result = combined(self, dim, index, src, op, include_self, why);
  if (result.defined()) return result;
  if (!why.empty()) {
    const CpuFn cpu = [dim, op, include_self](const std::vector<at::Tensor>& c) {
      return at::scatter_reduce(c[0], dim, c[1], c[2], op, include_self);
    };
    return run_on_cpu("scatter_reduce", {self, index, src}, cpu, why);
  }
  const at::Tensor base = include_self ? self : self.scatter(dim, index, 0);
  const at::Tensor sums = base.scatter_add(dim, index, src.to(self.scalar_type()));
  if (op == "sum") return sums;
  at::Tensor counts = at::ones_like(self);
  if (!include_self) counts = counts.scatter(dim, index, 0);
  counts = counts.scatter_add(dim, index, at::ones_like(src, self.options()));
  return sums / counts;
}

at::Tensor tpu_index_reduce(const at::Tensor& self, int64_t dim_arg, const at::Tensor& index, const at::Tensor& source,
                            c10::string_view reduce, bool include_self) {
  const int64_t dim = at::maybe_wrap_dim(dim_arg, std::max<int64_t>(self.dim(), 1));
  TORCH_CHECK_INDEX(index.dim() <= 1, "index_reduce_(): Index is supposed to be a vector");
  if (self.dim() == 0) {  // (squeeze, not view({}): {} would read as a dtype)
    return tpu_scatter_reduce(self.reshape({1}), 0, index.reshape({1}), source.reshape({1}), reduce, include_self).squeeze(0);
  }
  std::vector<int64_t> along(source.dim(), 1);
  along[dim] = -1;
  const at::Tensor spread = index.reshape(along).expand(source.sizes()).contiguous();
  return tpu_scatter_reduce(self, dim, spread, source, reduce, include_self);
}

// The legacy scatter(reduce='add' | 'multiply'): scatter_reduce's sum and prod including self.
at::Tensor tpu_scatter_legacy_reduce(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                                     c10::string_view reduce) {
  TORCH_CHECK(reduce == "add" || reduce == "multiply", "reduce argument must be either add or multiply.");
  return tpu_scatter_reduce(self, dim, index, src, reduce == "add" ? "sum" : "prod", true);
}

at::Tensor tpu_scatter_legacy_value_reduce(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                                           const at::Scalar& value, c10::string_view reduce) {
  return tpu_scatter_legacy_reduce(self, dim, index, at::full(index.sizes(), value, self.options()), reduce);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("scatter.reduce", tpu_scatter_legacy_reduce);
  m.impl("scatter.reduce_out", Variants<tpu_scatter_legacy_reduce>::out);
  m.impl("scatter_.reduce", Variants<tpu_scatter_legacy_reduce>::inplace);
  m.impl("scatter.value_reduce", tpu_scatter_legacy_value_reduce);
  m.impl("scatter.value_reduce_out", Variants<tpu_scatter_legacy_value_reduce>::out);
  m.impl("scatter_.value_reduce", Variants<tpu_scatter_legacy_value_reduce>::inplace);
  m.impl("scatter_reduce.two", tpu_scatter_reduce);
  m.impl("scatter_reduce.two_out", Variants<tpu_scatter_reduce>::out);
  m.impl("scatter_reduce_.two", Variants<tpu_scatter_reduce>::inplace);
  m.impl("index_reduce", tpu_index_reduce);
  m.impl("index_reduce.out", Variants<tpu_index_reduce>::out);
  m.impl("index_reduce_", Variants<tpu_index_reduce>::inplace);
}

}  // namespace vtpu::bridge
