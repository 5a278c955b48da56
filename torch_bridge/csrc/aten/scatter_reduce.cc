// scatter_reduce on the chip for 'sum' and 'mean', from the scatter kernels (gather_scatter.cc):
// sums as a scatter_add into self, or into self with the scattered positions zeroed when
// include_self is false; means divide them by how many values each position took (itself when
// included, plus every source value scattered there). 'prod', 'amax' and 'amin' need a scatter that combines by other than adding:
// they run on the CPU when the fallback is on, named so.
#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>
#include <torch/library.h>

#include "torch_bridge/csrc/aten/variants.h"
#include "torch_bridge/csrc/record/op_support.h"

namespace vtpu::bridge {
namespace {

at::Tensor tpu_scatter_reduce(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                              c10::string_view reduce, bool include_self) {
  const std::string op(reduce);
  std::string why;
  if (op != "sum" && op != "mean") why = "reduce='" + op + "' (only 'sum' and 'mean' scatter on the chip)";
  else if (op == "mean" && !at::isFloatingType(self.scalar_type())) why = "an integer 'mean' (torch floors it)";
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

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("scatter_reduce.two", tpu_scatter_reduce);
  m.impl("scatter_reduce.two_out", Variants<tpu_scatter_reduce>::out);
  m.impl("scatter_reduce_.two", Variants<tpu_scatter_reduce>::inplace);
}

}  // namespace vtpu::bridge
