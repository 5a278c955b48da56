// torch.autocast("tpu"): the AutocastPrivateUse1 key with CUDA's policy, from torch's own op lists
// (ATen/autocast_mode.h), so mixed precision means on the virtual chip what it means on a GPU:
//   lower_precision_fp  matmuls, convolutions, linear, attention, RNN cells: inputs cast to the
//                       autocast dtype (bf16 by default on tpu; fp16 also allowed)
//   fp32                exp/log/pow-like ops, reductions, norms and losses: inputs cast to f32
//   fp32_set_opt_dtype  softmax, cumsum, prod, norms: run with dtype=f32
//   promote             ops of several inputs: to the widest input type
// Every other op falls through to the next key (the autocast dtype flows through them unchanged).
// binary_cross_entropy is refused under autocast, as on CUDA (use the _with_logits form).
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace vtpu::bridge {
namespace {

using namespace at::autocast;
// the unqualified names torch's signature lists use
using at::IntArrayRef;
using at::Scalar;
using at::ScalarType;
using at::Tensor;

Tensor binary_cross_entropy_banned(const Tensor&, const Tensor&, const std::optional<Tensor>&, int64_t) {
  TORCH_CHECK(false,
              "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\n"
              "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
              "In this case, combine the two layers using torch.nn.functional.binary_cross_entropy_with_logits\n"
              "or torch.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits are\n"
              "safe to autocast.");
}

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) { m.fallback(torch::CppFunction::makeFallthrough()); }

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
#define VTPU_LOWER_PRECISION(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
  AT_FORALL_LOWER_PRECISION_FP(VTPU_LOWER_PRECISION)
#undef VTPU_LOWER_PRECISION
#define VTPU_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
  AT_FORALL_FP32(VTPU_FP32)
#undef VTPU_FP32
#define VTPU_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
  AT_FORALL_FP32_SET_OPT_DTYPE(VTPU_FP32_SET_OPT_DTYPE)
#undef VTPU_FP32_SET_OPT_DTYPE
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
#define VTPU_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
  AT_FORALL_PROMOTE(VTPU_PROMOTE)
#undef VTPU_PROMOTE
  m.impl(TORCH_SELECTIVE_NAME("aten::binary_cross_entropy"), TORCH_FN((&binary_cross_entropy_banned)));
}

}  // namespace
}  // namespace vtpu::bridge
