// What scatter_reduce (scatter_reduce.cc) takes from the gather/scatter lowering.
#pragma once

#include <ATen/ATen.h>

#include <string>

#include "kernels/codegen/vector_expr.h"

namespace vtpu::bridge {

// A tensor of self's shape and dtype holding `combine`'s identity (-inf for Max, +inf for Min, 1
// for Mul), with src's elements combined in, in order, at index's positions along `dim`: the
// scattered part of scatter_reduce's amax, amin and prod. Undefined, with `why` set, when the
// chip cannot (then the caller falls back).
at::Tensor scatter_combined(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                            kernels::ExprOp combine, std::string& why);

}  // namespace vtpu::bridge
