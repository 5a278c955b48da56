// Every aten op without a PrivateUse1 kernel lands here: torch's own error for inputs its checks
// reject (meta_check.h), else an error naming the op, or, when the
// user allowed it (VTPU_CPU_FALLBACK=1 / vtpu.set_cpu_fallback(True)), torch's CPU fallback with
// a one-time warning per op and a count in vtpu.stats(). Never a silent wrong answer. Sparse
// tensors are refused at their own dispatch key, with a message that says so (the CPU fallback
// cannot make a sparse tpu tensor either, so it does not suggest it).
#include <ATen/native/CPUFallback.h>
#include <torch/library.h>

#include "torch_bridge/csrc/record/meta_check.h"
#include "torch_bridge/csrc/record/op_support.h"
#include "torch_bridge/csrc/runtime/runtime.h"

namespace vtpu::bridge {
namespace {

void sparse_refused(const c10::OperatorHandle& op, torch::jit::Stack*) {
  const auto& name = op.schema().operator_name();
  TORCH_CHECK_NOT_IMPLEMENTED(false, "vtpu: sparse tensors are not supported on tpu (", name.name,
                              "); keep them on the CPU, or make them dense first (.to_dense())");
}

void fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  auto& rt = Runtime::get();
  const auto& name = op.schema().operator_name();
  // to_sparse and the like make sparse tpu tensors, which the CPU fallback cannot give either
  if (name.name.find("sparse") != std::string::npos) sparse_refused(op, stack);
  const std::string full = name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
  if (!rt.cpu_fallback_allowed()) {
    raise_if_torch_rejects(op, *stack);  // bad input gets torch's own error, as on the CPU
    TORCH_CHECK_NOT_IMPLEMENTED(false, "vtpu: ", full,
                                " is not lowered to the chip yet. Set VTPU_CPU_FALLBACK=1 (or call "
                                "vtpu.set_cpu_fallback(True)) to run it on the CPU.");
  }
  bool first = false;
  {
    std::lock_guard lock(rt.mutex());
    first = rt.stats().fallback_counts[full]++ == 0;
    rt.stats().cpu_fallback_ops++;
  }
  if (first) warn_user("vtpu: " + full + " runs on the CPU (not lowered yet); counted in vtpu.stats()");
  at::native::cpu_fallback(op, stack);
}

}  // namespace

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) { m.fallback(torch::CppFunction::makeFromBoxedFunction<&fallback>()); }
TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) { m.fallback(torch::CppFunction::makeFromBoxedFunction<&sparse_refused>()); }

}  // namespace vtpu::bridge
