// GradScaler's two kernels (torch.amp.GradScaler("tpu")), composed from lowered ops as CUDA's
// kernels compute them: gradients unscaled in place with found_inf raised where any is not finite,
// and the scale updated (backed off after an overflow, grown after growth_interval clean steps
// while it stays finite) without reading anything back to the host.
#include <ATen/ATen.h>
#include <torch/library.h>

namespace vtpu::bridge {
namespace {

void tpu_amp_non_finite_check_and_unscale_(at::TensorList grads, at::Tensor& found_inf, const at::Tensor& inv_scale) {
  for (const at::Tensor& grad : grads) {
    at::Tensor g = grad;  // the list holds the optimizer's gradients: unscaled in place
    const at::Tensor not_finite = at::logical_not(at::isfinite(g)).any().to(found_inf.scalar_type());
    found_inf.copy_(at::maximum(found_inf, not_finite.reshape(found_inf.sizes())));
    g.mul_(inv_scale);
  }
}

at::Tensor& tpu_amp_update_scale_(at::Tensor& scale, at::Tensor& growth_tracker, const at::Tensor& found_inf,
                                  double growth_factor, double backoff_factor, int64_t growth_interval) {
  const at::Tensor found = found_inf.gt(0);
  const at::Tensor successful = growth_tracker + 1;
  const at::Tensor grown = scale * growth_factor;
  const at::Tensor grow = successful.ge(growth_interval);
  const at::Tensor next_scale = at::where(found, scale * backoff_factor, at::where(grow.logical_and(at::isfinite(grown)), grown, scale));
  const at::Tensor next_tracker = at::where(found.logical_or(grow), at::zeros_like(successful), successful);
  scale.copy_(next_scale);
  growth_tracker.copy_(next_tracker);
  return scale;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_amp_foreach_non_finite_check_and_unscale_", tpu_amp_non_finite_check_and_unscale_);
  m.impl("_amp_update_scale_", tpu_amp_update_scale_);
}

}  // namespace vtpu::bridge
