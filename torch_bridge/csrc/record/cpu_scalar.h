// A CPU 0-dim tensor (a wrapped Python number, or a scalar tensor torch lets stand beside device
// tensors) passed where a tensor goes: recorded as a constant, never moved to the chip. Layout
// decisions and op recording both ask it.
#pragma once

#include <ATen/ATen.h>

#include <array>

namespace vtpu::bridge {

inline bool is_cpu_scalar(const at::Tensor& t) { return t.is_cpu() && t.dim() == 0; }

// A Python number as torch passes it to .Tensor overloads: a 0-dim CPU tensor flagged as a
// wrapped number, so type promotion treats it like a scalar (it never widens a tensor's dtype).
inline at::Tensor wrapped_scalar(const at::Scalar& s) {
  const auto dtype = s.isComplex() ? at::kComplexDouble : s.isFloatingPoint() ? at::kDouble : s.isBoolean() ? at::kBool : at::kLong;
  at::Tensor t = at::scalar_tensor(s, dtype);
  t.unsafeGetTensorImpl()->set_wrapped_number(true);
  return t;
}

// Both operands of a binary op as tpu tensors of `dtype` where one is a CPU scalar, for kernels
// that take every operand from memory: the scalar is uploaded to the other operand's device.
inline std::array<at::Tensor, 2> with_scalar_uploaded(const at::Tensor& self, const at::Tensor& other, c10::ScalarType dtype) {
  const c10::Device device = self.device().is_privateuseone() ? self.device() : other.device();
  const auto on_chip = [&](const at::Tensor& t) { return is_cpu_scalar(t) ? t.to(device, dtype) : t; };
  return {on_chip(self), on_chip(other)};
}

}  // namespace vtpu::bridge
