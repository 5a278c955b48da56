// pow with an integer result on the chip, exact (kernels/compose/integer_power.h); pointwise.cc's
// pow overloads send their integer cases here.
#pragma once

#include <ATen/ATen.h>

#include "torch_bridge/csrc/record/op_support.h"

namespace vtpu::bridge {

// self ** other where torch's result dtype is an integer type (either may be a wrapped number).
at::Tensor integer_pow(const at::Tensor& self, const at::Tensor& other, const CpuFn& cpu);

}  // namespace vtpu::bridge
