// Every aten op without a PrivateUse1 kernel lands here: an error naming the op, or, when the
// user allowed it (VTPU_CPU_FALLBACK=1 / vtpu.set_cpu_fallback(True)), torch's CPU fallback with
// a one-time warning per op and a count in vtpu.stats(). Never a silent wrong answer.
#include <ATen/native/CPUFallback.h>
#include <torch/library.h>

#include "torch_bridge/csrc/record/op_support.h"
#include "torch_bridge/csrc/runtime/runtime.h"

namespace vtpu::bridge {
namespace {

void fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  auto& rt = Runtime::get();
  const auto& name = op.schema().operator_name();
  const std::string full = name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
  TORCH_CHECK_NOT_IMPLEMENTED(rt.cpu_fallback_allowed(), "vtpu: ", full,
                              " is not lowered to the chip yet. Set VTPU_CPU_FALLBACK=1 (or call "
                              "vtpu.set_cpu_fallback(True)) to run it on the CPU.");
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

}  // namespace vtpu::bridge
