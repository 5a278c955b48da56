// torch.cdist's direct path on the chip (_cdist_forward, _cdist_backward): p-norm distances of
// every pair of rows from their differences, broadcast over [.., P, R, M]. Euclidean distances
// between larger sets take torch's matmul formula (_euclidean_dist) before reaching here, and
// run on the chip through mm already. The backward is torch's, per p: the gradient of each
// distance with respect to x1's row, summed over x2's rows (x2's gradient is the same call with
// the roles swapped, as torch's derivative table does).
#include <ATen/ATen.h>
#include <torch/library.h>

#include <cmath>
#include <limits>

#include "torch_bridge/csrc/record/op_support.h"

namespace vtpu::bridge {
namespace {

void check(const at::Tensor& x1, const at::Tensor& x2, double p) {
  TORCH_CHECK(x1.dim() >= 2 && x2.dim() >= 2, "cdist only supports at least 2D tensors, X1 got: ", x1.dim(), "D");
  TORCH_CHECK(x1.size(-1) == x2.size(-1), "X1 and X2 must have the same number of columns. X1: ", x1.size(-1),
              " X2: ", x2.size(-1));
  TORCH_CHECK(p >= 0, "cdist only supports non-negative p values");
  TORCH_CHECK(at::isFloatingType(x1.scalar_type()), "cdist only supports floating-point dtypes, X1 got: ", x1.scalar_type());
}

at::Tensor tpu_cdist_forward(const at::Tensor& x1, const at::Tensor& x2, double p, std::optional<int64_t>) {
  check(x1, x2, p);
  const at::Tensor diff = (x1.unsqueeze(-2) - x2.unsqueeze(-3)).abs();  // [.., P, R, M]
  // p = 0 counts the coordinates that differ as the CPU does, min(ceil(|d|), 1) summed, so a NaN
  // coordinate makes the distance NaN (d != 0 counted it as 1).
  if (p == 0) return diff.ceil().clamp_max(1).sum(-1);
  if (p == 1) return diff.sum(-1);
  if (p == 2) return diff.square().sum(-1).sqrt();
  if (std::isinf(p)) return diff.amax(-1);
  return diff.pow(p).sum(-1).pow(1.0 / p);
}

at::Tensor tpu_cdist_backward(const at::Tensor& grad, const at::Tensor& x1, const at::Tensor& x2, double p,
                              const at::Tensor& cdist) {
  if (p == 0 || x1.numel() == 0 || x2.numel() == 0) return at::zeros_like(x1);
  const at::Tensor diff = x1.unsqueeze(-2) - x2.unsqueeze(-3);  // [.., P, R, M]
  const at::Tensor g = grad.unsqueeze(-1), dist = cdist.unsqueeze(-1);
  at::Tensor term;
  if (p == 1) {
    term = g * diff.sign();
  } else if (p == 2) {
    term = at::where(dist.eq(0), at::zeros_like(diff), g * diff / dist);
  } else if (std::isinf(p)) {
    term = g * diff.sign() * diff.abs().eq(dist);
  } else {  // grad * sign(d) |d|^(p-1) / dist^(p-1), zero where the distance (or, p < 1, the difference) is
    term = g * diff.sign() * diff.abs().pow(p - 1) / dist.pow(p - 1);
    term = at::where(dist.eq(0) | (p < 1 ? diff.eq(0) : at::zeros_like(diff, at::kBool)), at::zeros_like(diff), term);
  }
  return term.sum(-2);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_cdist_forward", tpu_cdist_forward);
  m.impl("_cdist_backward", tpu_cdist_backward);
}

}  // namespace vtpu::bridge
