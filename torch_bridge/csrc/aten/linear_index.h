// Several integer index tensors (x[i0, i1, ...], None between them allowed) as one: the indexed
// dims moved first and flattened into a block, the index tensors combined on the chip into one
// int32 linear index into it (each wrapped if negative, scaled by its dim's stride, summed). A
// component outside its dim makes the index point past the block, where the gather and scatter
// kernels trap, as torch raises IndexError. What x[...] and x[...] = v with several index tensors
// run as their one-index forms.
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <vector>

namespace vtpu::bridge {

struct LinearIndex {
  at::Tensor index;           // int32, the index tensors' broadcast shape
  at::Tensor flat;            // self's indexed dims moved first and flattened: [block, rest...] (a view where possible)
  at::Tensor moved;           // self's indexed dims moved first (a view of self)
  std::vector<int64_t> dims;  // the indexed dims, ascending
  // torch's result layout: the index shape where the indexed dims were when they are adjacent
  // (and not first), else in front
  bool index_dims_in_place = false;
};

// nullopt when an index tensor is not int32/int64 (boolean masks take other paths).
std::optional<LinearIndex> linear_index(const at::Tensor& self, const std::vector<std::optional<at::Tensor>>& list);

}  // namespace vtpu::bridge
