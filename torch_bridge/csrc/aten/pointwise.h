// The pointwise lowerings other op families compose with (addmm's scaled bias, std's square
// root), callable as plain functions; they record exactly what the registered ops record.
#pragma once

#include <ATen/ATen.h>

namespace vtpu::bridge::pointwise {

at::Tensor add(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha);
at::Tensor mul(const at::Tensor& self, const at::Tensor& other);
at::Tensor sqrt(const at::Tensor& self);
// A Python number as torch passes it to .Tensor overloads (a wrapped 0-dim CPU tensor).
at::Tensor wrapped_scalar(const at::Scalar& s);

}  // namespace vtpu::bridge::pointwise
