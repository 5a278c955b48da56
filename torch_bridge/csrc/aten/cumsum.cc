// torch.cumsum on the chip (kernels/compose/cumsum.h: a matmul with a triangular matrix of ones). Float
// inputs keep their dtype (bf16 scanned in f32, rounded once). Integer inputs held as int32 words
// (bool, int8, int32, int64 of known magnitude) scan exactly (ops_int64.h): into int32, wrapping
// as torch does (MoE offsets from expert counts), or into int64 when every partial sum stays
// below 2^31 (position ids from attention masks). Other integers and a dtype argument that
// changes a float result run on the CPU when the fallback is on.
#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>
#include <torch/library.h>

#include "kernels/compose/cumsum.h"
#include "kernels/generators/matmul.h"
#include "torch_bridge/csrc/aten/complex.h"
#include "torch_bridge/csrc/aten/int64.h"
#include "torch_bridge/csrc/aten/variants.h"
#include "torch_bridge/csrc/record/op_support.h"
#include "torch_bridge/csrc/runtime/runtime.h"

namespace vtpu::bridge {
namespace {

at::Tensor tpu_cumsum(const at::Tensor& self, int64_t dim_arg, std::optional<c10::ScalarType> dtype) {
  const CpuFn cpu = [dim_arg, dtype](const std::vector<at::Tensor>& c) { return at::cumsum(c[0], dim_arg, dtype); };
  const bool integral = at::isIntegralType(self.scalar_type(), true);
  const c10::ScalarType result = dtype.value_or(integral ? at::kLong : self.scalar_type());
  if (self.dim() == 0 || self.numel() == 0) {  // nothing to scan: the element itself, in the result's dtype
    at::maybe_wrap_dim(dim_arg, self.dim());
    return self.to(result, /*non_blocking=*/false, /*copy=*/true);
  }
  const int64_t dim = at::maybe_wrap_dim(dim_arg, self.dim());
  if (self.scalar_type() == at::kComplexFloat && result == at::kComplexFloat) {  // a sum: each plane scanned
    return complex::linear(self, [&](const at::Tensor& p) { return tpu_cumsum(p, dim, std::nullopt); });
  }
  if (integral) {
    if (auto r = integer_cumsum(self, dim, result, cpu)) return *r;
    return run_on_cpu("cumsum", {self}, cpu,
                      "an integer cumsum into int64 whose partial sums may reach 2^31, a scan over 65793 elements, or into "
                      "a dtype other than int32 and int64");
  }
  if (result != self.scalar_type()) {
    // a float dtype over a float input: the CPU converts first, then scans (in f32 either way here)
    if (is_chip_float(result) && is_chip_float(self.scalar_type())) return tpu_cumsum(self.to(result), dim, std::nullopt);
    return run_on_cpu("cumsum", {self}, cpu, "a cumsum with a dtype argument");
  }
  const int passes = kernels::passes_for_precision(Runtime::get().matmul_precision());
  return record("cumsum", {self}, result, [&](kernels::Graph& g, const std::vector<int>& v) {
    return kernels::float_cumsum(g, v[0], dim, passes);
  }, cpu);
}

// The out= form (and cumsum_, which torch routes through it): computed, then copied into `out`.

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("cumsum", tpu_cumsum);
  m.impl("cumsum.out", Variants<tpu_cumsum>::out);
}

}  // namespace vtpu::bridge
