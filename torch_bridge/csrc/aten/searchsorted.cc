// torch.searchsorted (and bucketize, torch's composite over it) on the chip: the insertion index of
// each value is how many boundaries lie below it (side 'left': boundary < value; 'right':
// boundary <= value), a compare of every value with every boundary of its row and a row sum.
// Exact for any sorted boundaries; memory and time grow as values x boundaries, where the CPU's
// binary search grows as values x log(boundaries): the chip's way for the sizes models use
// (bucket edges, vocabulary cut-offs).
#include <ATen/ATen.h>
#include <torch/library.h>

#include "torch_bridge/csrc/record/op_support.h"

namespace vtpu::bridge {
namespace {

bool right_side(bool right, std::optional<c10::string_view> side) {
  if (side) {
    TORCH_CHECK(*side == "left" || *side == "right", "torch.searchsorted(): side can only be 'left' or 'right' but got ", *side);
    TORCH_CHECK(!right || *side == "right", "torch.searchsorted(): side and right can't be set to opposites, got side of ",
                *side, " while right was True");
    return *side == "right";
  }
  return right;
}

at::Tensor tpu_searchsorted(const at::Tensor& sorted_sequence, const at::Tensor& self, bool out_int32, bool right,
                            std::optional<c10::string_view> side, const std::optional<at::Tensor>& sorter) {
  TORCH_CHECK(sorted_sequence.dim() >= 1, "torch.searchsorted(): boundaries tensor should have positive dimension");
  TORCH_CHECK(sorted_sequence.dim() == 1 || (self.dim() == sorted_sequence.dim() &&
                                             self.sizes().slice(0, self.dim() - 1) ==
                                                 sorted_sequence.sizes().slice(0, sorted_sequence.dim() - 1)),
              "torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 dimensions of boundaries "
              "tensor and input value tensor must match");
  const at::Tensor boundaries = sorter && sorter->defined() ? sorted_sequence.gather(-1, *sorter) : sorted_sequence;
  // values [..., M, 1] against boundaries [..., 1, B] (1-D boundaries: every value against all)
  const at::Tensor values = self.dim() == 0 ? self.reshape({1, 1}) : self.unsqueeze(-1);
  const at::Tensor edges = sorted_sequence.dim() == 1 ? boundaries : boundaries.unsqueeze(-2);
  const at::Tensor below = right_side(right, side) ? edges.le(values) : edges.lt(values);
  at::Tensor index = below.sum(-1);
  if (self.dim() == 0) index = index.reshape({});
  return out_int32 ? index.to(at::kInt) : index;
}

at::Tensor tpu_searchsorted_scalar(const at::Tensor& sorted_sequence, const at::Scalar& self, bool out_int32, bool right,
                                   std::optional<c10::string_view> side, const std::optional<at::Tensor>& sorter) {
  TORCH_CHECK(sorted_sequence.dim() == 1, "torch.searchsorted(): input value can be a scalar only when boundaries tensor "
              "dimension is 1, but we got boundaries tensor dim(", sorted_sequence.dim(), ")");
  return tpu_searchsorted(sorted_sequence, at::scalar_tensor(self, sorted_sequence.options()), out_int32, right, side, sorter);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("searchsorted.Tensor", tpu_searchsorted);
  m.impl("searchsorted.Scalar", tpu_searchsorted_scalar);
}

}  // namespace vtpu::bridge
