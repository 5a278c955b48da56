// torch.histc on the chip, as torch's CPU kernel bins: element x in [min, max] goes to bin
// trunc((x - min) * bins / (max - min)) computed in f32 in that order (the last bin takes x ==
// max), elements outside the range and NaN are not counted; the counts are a scatter-add of
// ones into bins + 1 slots, the last one taking the uncounted (kernels/generators/scatter_add.h). f32 inputs
// and integer ones (bool, int8, int32 and int64 of known magnitude below 2^24, counted as f32,
// exact, with the result in their own dtype as accelerators give it; the CPU kernel refuses
// integers) with min < max run on the chip; the data-derived range of min == max and other
// dtypes are counted on the host.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "torch_bridge/csrc/aten/variants.h"
#include "torch_bridge/csrc/record/op_support.h"
#include "torch_bridge/csrc/record/recorder.h"

namespace vtpu::bridge {
namespace {

using kernels::DType;
using kernels::ExprOp;
using kernels::Graph;

at::Tensor histc_on_host(const at::Tensor& self, int64_t bins, const at::Scalar& min, const at::Scalar& max, const std::string& why) {
  return run_on_cpu("histc", {self}, [=](const std::vector<at::Tensor>& c) {
    if (!at::isIntegralType(c[0].scalar_type(), true)) return at::histc(c[0], bins, min, max);
    return at::histc(c[0].to(at::kFloat), bins, min, max).to(c[0].scalar_type());
  }, why);
}

at::Tensor tpu_histc(const at::Tensor& self, int64_t bins, const at::Scalar& min, const at::Scalar& max) {
  TORCH_CHECK(bins > 0, "torch.histogram(): bins must be > 0, but got ", bins, " for dimension 0");
  const auto t = self.scalar_type();
  const std::optional<int64_t> bound = t == at::kLong ? int64_bound_of(self) : std::nullopt;
  const bool int64_small = bound && *bound < (int64_t{1} << 24);
  const bool countable = t == at::kFloat || t == at::kBool || t == at::kChar || t == at::kInt || int64_small;
  // The edges as the CPU kernel holds them: in the input's type (f32 here).
  const float left = min.toFloat(), right = max.toFloat();
  if (!countable || !(left < right) || self.numel() == 0 || self.numel() >= (int64_t{1} << 24)) {
    return histc_on_host(self, bins, min, max, "a range from the data (min == max), or a dtype counted on the host");
  }
  const int64_t n = self.numel();
  const double width = double(right - left);  // rounded to f32 as the CPU subtracts
  const at::Tensor input = int64_small ? index_words(self) : self.reshape({n});
  const at::Tensor counts = record("histc", {input}, at::kFloat, [&](Graph& g, const std::vector<int>& v) {
    int x = int64_small ? g.int64_narrow(v[0], *bound + 1, "histc") : v[0];
    if (g.node(x).type.dtype != DType::F32) x = g.cast(x, DType::F32, "histc");
    const int scaled = g.binary_scalar(ExprOp::Div, g.binary_scalar(ExprOp::Mul, g.binary_scalar(ExprOp::Sub, x, double(left), false, "histc"),
                                                                    double(bins), false, "histc"), width, false, "histc");
    const int bin = g.binary(ExprOp::Min, g.cast(scaled, DType::I32, "histc"), g.full({{1}, DType::I32}, double(bins - 1), "histc"), "histc");
    const int inside = g.binary(ExprOp::And, g.binary_scalar(ExprOp::Ge, x, double(left), false, "histc"),
                                g.binary_scalar(ExprOp::Le, x, double(right), false, "histc"), "histc");
    const int slot = g.where(inside, bin, g.full({{1}, DType::I32}, double(bins), "histc"), "histc");
    const int ones = g.full({{n, 1}, DType::F32}, 1.0, "histc");
    return g.strided_copy(g.scatter_add(ones, slot, /*index_pairs=*/false, bins + 1, -1, "histc"), {bins}, {1}, 0, "histc");
  }, [=](const std::vector<at::Tensor>&) { return at::histc(self.cpu().to(at::kFloat), bins, min, max); });
  return t == at::kFloat ? counts : counts.to(t);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("histc", tpu_histc);
  m.impl("histc.out", Variants<tpu_histc>::out);
}

}  // namespace vtpu::bridge
