// The fused optimizer steps torch uses on accelerators (torch.optim.Adam/AdamW/SGD/Adagrad(fused=True),
// and Trainer's default "adamw_torch_fused"), composed from lowered ops with the arithmetic of
// torch's fused CUDA kernels, so in defer_and_fuse each parameter's update fuses into one
// elementwise kernel. Step counts stay on the device (bias corrections as exp(step * log(beta)),
// no sync); with a GradScaler, gradients are unscaled by grad_scale and a step that found an
// inf/NaN leaves every tensor unchanged (found_inf selects the old values, as the CUDA kernels
// return early).
#include <ATen/ATen.h>
#include <torch/library.h>

#include <cmath>
#include <optional>

namespace vtpu::bridge {
namespace {

// `updated` where no inf was found, `old` where one was.
at::Tensor unless_found_inf(const at::Tensor& updated, const at::Tensor& old, const std::optional<at::Tensor>& found_inf) {
  if (!found_inf || !found_inf->defined()) return updated;
  return at::where(found_inf->to(old.device()).gt(0).reshape({}), old, updated);
}

at::Tensor unscaled(const at::Tensor& grad, const std::optional<at::Tensor>& grad_scale, bool maximize) {
  at::Tensor g = grad_scale && grad_scale->defined() ? grad / grad_scale->to(grad.device()).reshape({}) : grad;
  return maximize ? -g : g;
}

// lr as a number or a 0-dim tensor (the .tensor_lr overloads), times `x`.
struct LearningRate {
  double value = 0;
  std::optional<at::Tensor> tensor;
  at::Tensor times(const at::Tensor& x) const { return tensor ? x * tensor->to(x.device()).reshape({}) : x * value; }
};

void adam(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs, at::TensorList exp_avg_sqs,
          at::TensorList max_exp_avg_sqs, at::TensorList state_steps, const LearningRate& lr, double beta1, double beta2,
          double weight_decay, double eps, bool amsgrad, bool maximize, const std::optional<at::Tensor>& grad_scale,
          const std::optional<at::Tensor>& found_inf, bool decoupled_weight_decay) {
  for (size_t i = 0; i < params.size(); ++i) {
    at::Tensor param = params[i], exp_avg = exp_avgs[i], exp_avg_sq = exp_avg_sqs[i];
    at::Tensor grad = unscaled(grads[i], grad_scale, maximize);
    at::Tensor p = param;
    if (weight_decay != 0) {
      if (decoupled_weight_decay) p = p - lr.times(p) * weight_decay;
      else grad = grad + p * weight_decay;
    }
    const at::Tensor m = exp_avg * beta1 + grad * (1 - beta1);
    const at::Tensor v = exp_avg_sq * beta2 + grad * grad * (1 - beta2);
    const at::Tensor step = state_steps[i].to(param.device(), at::kFloat);
    const at::Tensor bias_correction1 = 1 - (step * std::log(beta1)).exp();
    const at::Tensor bias_correction2_sqrt = (1 - (step * std::log(beta2)).exp()).sqrt();
    at::Tensor second = v;
    if (amsgrad) {
      second = at::maximum(max_exp_avg_sqs[i], v);
      at::Tensor max_sq = max_exp_avg_sqs[i];
      max_sq.copy_(unless_found_inf(second, max_sq, found_inf));
    }
    const at::Tensor denom = second.sqrt() / bias_correction2_sqrt + eps;
    const at::Tensor updated = p - lr.times(m / denom) / bias_correction1;
    param.copy_(unless_found_inf(updated, param, found_inf));
    exp_avg.copy_(unless_found_inf(m, exp_avg, found_inf));
    exp_avg_sq.copy_(unless_found_inf(v, exp_avg_sq, found_inf));
  }
}

#define VTPU_ADAM_SIGNATURE(LR_TYPE)                                                                                      \
  at::TensorList params, at::TensorList grads, at::TensorList exp_avgs, at::TensorList exp_avg_sqs,                        \
      at::TensorList max_exp_avg_sqs, at::TensorList state_steps, LR_TYPE lr, double beta1, double beta2,                  \
      double weight_decay, double eps, bool amsgrad, bool maximize, const std::optional<at::Tensor>& grad_scale,           \
      const std::optional<at::Tensor>& found_inf
#define VTPU_ADAM_ARGS(LR, DECOUPLED)                                                                                    \
  adam(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, LR, beta1, beta2, weight_decay, eps, amsgrad, \
       maximize, grad_scale, found_inf, DECOUPLED)

void tpu_fused_adam(VTPU_ADAM_SIGNATURE(double)) { VTPU_ADAM_ARGS((LearningRate{lr, std::nullopt}), false); }
void tpu_fused_adam_tensor_lr(VTPU_ADAM_SIGNATURE(const at::Tensor&)) { VTPU_ADAM_ARGS((LearningRate{0, lr}), false); }
void tpu_fused_adamw(VTPU_ADAM_SIGNATURE(double)) { VTPU_ADAM_ARGS((LearningRate{lr, std::nullopt}), true); }
void tpu_fused_adamw_tensor_lr(VTPU_ADAM_SIGNATURE(const at::Tensor&)) { VTPU_ADAM_ARGS((LearningRate{0, lr}), true); }
#undef VTPU_ADAM_ARGS
#undef VTPU_ADAM_SIGNATURE

// SGD with momentum, dampening and Nesterov; the first step seeds the momentum buffer with the
// gradient, as torch's fused kernel does.
void sgd(at::TensorList params, at::TensorList grads, at::TensorList momentum_buffers, double weight_decay, double momentum,
         const LearningRate& lr, double dampening, bool nesterov, bool maximize, bool is_first_step,
         const std::optional<at::Tensor>& grad_scale, const std::optional<at::Tensor>& found_inf) {
  for (size_t i = 0; i < params.size(); ++i) {
    at::Tensor param = params[i];
    at::Tensor grad = unscaled(grads[i], grad_scale, maximize);
    if (weight_decay != 0) grad = grad + param * weight_decay;
    if (momentum != 0) {
      at::Tensor buffer = momentum_buffers[i];
      const at::Tensor next = is_first_step ? grad : buffer * momentum + grad * (1 - dampening);
      buffer.copy_(unless_found_inf(next, buffer, found_inf));
      grad = nesterov ? grad + next * momentum : next;
    }
    param.copy_(unless_found_inf(param - lr.times(grad), param, found_inf));
  }
}

void tpu_fused_sgd(at::TensorList params, at::TensorList grads, at::TensorList momentum_buffers, double weight_decay,
                   double momentum, double lr, double dampening, bool nesterov, bool maximize, bool is_first_step,
                   const std::optional<at::Tensor>& grad_scale, const std::optional<at::Tensor>& found_inf) {
  sgd(params, grads, momentum_buffers, weight_decay, momentum, LearningRate{lr, std::nullopt}, dampening, nesterov, maximize,
      is_first_step, grad_scale, found_inf);
}
void tpu_fused_sgd_tensor_lr(at::TensorList params, at::TensorList grads, at::TensorList momentum_buffers, double weight_decay,
                             double momentum, const at::Tensor& lr, double dampening, bool nesterov, bool maximize,
                             bool is_first_step, const std::optional<at::Tensor>& grad_scale,
                             const std::optional<at::Tensor>& found_inf) {
  sgd(params, grads, momentum_buffers, weight_decay, momentum, LearningRate{0, lr}, dampening, nesterov, maximize,
      is_first_step, grad_scale, found_inf);
}

// Adagrad: the learning rate decayed by the step count, the squared gradients summed.
void adagrad(at::TensorList params, at::TensorList grads, at::TensorList state_sums, at::TensorList state_steps,
             const LearningRate& lr, double lr_decay, double weight_decay, double eps, bool maximize,
             const std::optional<at::Tensor>& grad_scale, const std::optional<at::Tensor>& found_inf) {
  for (size_t i = 0; i < params.size(); ++i) {
    at::Tensor param = params[i], state_sum = state_sums[i];
    at::Tensor grad = unscaled(grads[i], grad_scale, maximize);
    if (weight_decay != 0) grad = grad + param * weight_decay;
    const at::Tensor step = state_steps[i].to(param.device(), at::kFloat);
    const at::Tensor sum = state_sum + grad * grad;
    const at::Tensor scaled = lr.times(grad / (sum.sqrt() + eps)) / ((step - 1) * lr_decay + 1);
    state_sum.copy_(unless_found_inf(sum, state_sum, found_inf));
    param.copy_(unless_found_inf(param - scaled, param, found_inf));
  }
}

void tpu_fused_adagrad(at::TensorList params, at::TensorList grads, at::TensorList state_sums, at::TensorList state_steps,
                       double lr, double lr_decay, double weight_decay, double eps, bool maximize,
                       const std::optional<at::Tensor>& grad_scale, const std::optional<at::Tensor>& found_inf) {
  adagrad(params, grads, state_sums, state_steps, LearningRate{lr, std::nullopt}, lr_decay, weight_decay, eps, maximize,
          grad_scale, found_inf);
}
void tpu_fused_adagrad_tensor_lr(at::TensorList params, at::TensorList grads, at::TensorList state_sums,
                                 at::TensorList state_steps, const at::Tensor& lr, double lr_decay, double weight_decay,
                                 double eps, bool maximize, const std::optional<at::Tensor>& grad_scale,
                                 const std::optional<at::Tensor>& found_inf) {
  adagrad(params, grads, state_sums, state_steps, LearningRate{0, lr}, lr_decay, weight_decay, eps, maximize, grad_scale,
          found_inf);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fused_adagrad_", tpu_fused_adagrad);
  m.impl("_fused_adagrad_.tensor_lr", tpu_fused_adagrad_tensor_lr);
  m.impl("_fused_adam_", tpu_fused_adam);
  m.impl("_fused_adam_.tensor_lr", tpu_fused_adam_tensor_lr);
  m.impl("_fused_adamw_", tpu_fused_adamw);
  m.impl("_fused_adamw_.tensor_lr", tpu_fused_adamw_tensor_lr);
  m.impl("_fused_sgd_", tpu_fused_sgd);
  m.impl("_fused_sgd_.tensor_lr", tpu_fused_sgd_tensor_lr);
}

}  // namespace vtpu::bridge
