// torch's own input checks, run on meta tensors (shapes, dtypes and strides, no data) before vtpu
// says an op "cannot run on the chip": a bad input then gets the exception and message the CPU
// gives (mat1 and mat2 shapes cannot be multiplied ...), not a hint to turn the CPU fallback on.
// Only the failing path pays for it.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <functional>
#include <vector>

#include <ATen/Tensor.h>

namespace vtpu::bridge {

// Runs `op` (a function of the inputs, as given to run_on_cpu) on meta copies of `inputs` (CPU
// scalars stay) and rethrows what torch raised; returns when torch accepts the inputs or the
// meta run cannot tell (no meta kernel, or the op needs the data: such errors name meta tensors).
void raise_if_torch_rejects(const std::vector<at::Tensor>& inputs,
                            const std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>&)>& op);

// The same for a boxed call: the operator on a copy of the stack, its tpu tensors made meta.
void raise_if_torch_rejects(const c10::OperatorHandle& op, const torch::jit::Stack& stack);

}  // namespace vtpu::bridge
