// torch.multinomial on the chip, so sampling (generate(do_sample=True), RL policies) stays on it.
// With replacement: each draw is the category whose cumulative probability first passes a
// uniform number (a cumsum, then searchsorted's compare and row sum); without: the k largest of
// log(u) / p (Efraimidis-Spirakis weighted sampling without replacement: the same distribution
// as drawing one category at a time and renormalising), by topk; asked for more than the
// positive categories, it adds zero-probability ones after them, as the CPU does. The numbers come from the
// chip's Philox stream, so draws differ from the CPU's as any random op's do; the distribution
// is torch's. Arguments are checked as the CPU checks them, which reads them back to the host
// (CUDA checks on the device and reports later; a sync is the price of a clear error).
#include <ATen/ATen.h>
#include <torch/library.h>

#include "torch_bridge/csrc/aten/order_statistics.h"
#include "torch_bridge/csrc/aten/variants.h"
#include "torch_bridge/csrc/record/op_support.h"

namespace vtpu::bridge {
namespace {

void check_distribution(const at::Tensor& p, int64_t num_samples, bool replacement) {
  TORCH_CHECK(p.dim() == 1 || p.dim() == 2, "prob_dist must be 1 or 2 dim");
  TORCH_CHECK(at::isFloatingType(p.scalar_type()), "multinomial only supports floating-point dtypes for input, got: ",
              p.scalar_type());
  TORCH_CHECK(num_samples > 0, "cannot sample n_sample <= 0 samples");
  const int64_t categories = p.size(-1);
  TORCH_CHECK(replacement || num_samples <= categories,
              "cannot sample n_sample > prob_dist.size(-1) samples without replacement");
  const at::Tensor rows = p.reshape({-1, categories}).to(at::kFloat);
  // One read-back for both checks: [any negative or non-finite, any row summing to zero].
  const at::Tensor flags =
      at::stack({(rows.lt(0) | rows.isinf() | rows.isnan()).any(), rows.sum(-1).eq(0).any()}).to(at::kFloat).cpu();
  const float* f = flags.data_ptr<float>();
  TORCH_CHECK(f[0] == 0, "probability tensor contains either `inf`, `nan` or element < 0");
  TORCH_CHECK(f[1] == 0, "invalid multinomial distribution (sum of probabilities <= 0)");
}

at::Tensor tpu_multinomial(const at::Tensor& self, int64_t num_samples, bool replacement, std::optional<at::Generator> gen) {
  check_distribution(self, num_samples, replacement);
  const int64_t categories = self.size(-1);
  const at::Tensor p = self.reshape({-1, categories}).to(at::kFloat);
  const int64_t rows = p.size(0);
  const auto options = p.options();
  at::Tensor samples;
  if (replacement) {
    at::Tensor cdf = p.cumsum(-1);
    cdf = cdf / cdf.narrow(-1, categories - 1, 1);  // the last is exactly 1
    const at::Tensor u = at::rand({rows, num_samples}, gen, options);
    // draws past every category's cumulative probability (rounding) take the last non-empty one
    samples = at::searchsorted(cdf, u, /*out_int32=*/false, /*right=*/true).clamp_max(categories - 1);
  } else {
    const at::Tensor u = at::rand({rows, categories}, gen, options).clamp_min(std::numeric_limits<float>::min());
    const at::Tensor keys = at::where(p.gt(0), u.log() / p, -std::numeric_limits<float>::infinity());
    samples = std::get<1>(at::topk(keys, num_samples, -1, /*largest=*/true, /*sorted=*/true));
  }
  return self.dim() == 1 ? samples.reshape({num_samples}) : samples;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("multinomial", tpu_multinomial);
  m.impl("multinomial.out", Variants<tpu_multinomial>::out);
}

}  // namespace vtpu::bridge
