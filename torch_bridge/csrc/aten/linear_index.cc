// See linear_index.h.
#include "torch_bridge/csrc/aten/linear_index.h"

namespace vtpu::bridge {

std::optional<LinearIndex> linear_index(const at::Tensor& self, const std::vector<std::optional<at::Tensor>>& list) {
  LinearIndex li;
  std::vector<at::Tensor> index;
  for (size_t k = 0; k < list.size(); ++k) {
    if (!list[k] || !list[k]->defined()) continue;
    const auto type = list[k]->scalar_type();
    if (type != at::kLong && type != at::kInt) return std::nullopt;
    li.dims.push_back(static_cast<int64_t>(k));
    index.push_back(list[k]->device() == self.device() ? *list[k] : list[k]->to(self.device()));
  }
  if (li.dims.empty()) return std::nullopt;
  const bool adjacent = li.dims.back() - li.dims.front() + 1 == static_cast<int64_t>(li.dims.size());
  li.index_dims_in_place = adjacent && li.dims.front() > 0;
  const auto broadcast = at::broadcast_tensors(index);
  std::vector<int64_t> front(li.dims.size());
  for (size_t j = 0; j < li.dims.size(); ++j) front[j] = static_cast<int64_t>(j);
  li.moved = self.movedim(li.dims, front);
  int64_t block = 1;
  for (int64_t d : li.dims) block *= self.size(d);
  TORCH_CHECK(block < (int64_t{1} << 31), "vtpu: indexing a block of ", block, " elements (the chip's index limit is 2^31)");
  at::Tensor outside;
  int64_t stride = block;
  for (size_t j = 0; j < li.dims.size(); ++j) {
    const int64_t size = self.size(li.dims[j]);
    stride /= size;
    const at::Tensor i = broadcast[j].to(at::kInt);
    const at::Tensor wrapped = at::where(i.lt(0), i + size, i);
    const at::Tensor bad = wrapped.lt(0).logical_or(wrapped.ge(size));
    const at::Tensor term = stride == 1 ? wrapped : wrapped * stride;
    li.index = li.index.defined() ? li.index + term : term;
    outside = outside.defined() ? outside.logical_or(bad) : bad;
  }
  li.index = at::where(outside, at::full({}, block, li.index.options()), li.index);
  std::vector<int64_t> flat_shape = {block};
  flat_shape.insert(flat_shape.end(), li.moved.sizes().begin() + static_cast<int64_t>(li.dims.size()), li.moved.sizes().end());
  li.flat = li.moved.reshape(flat_shape);
  return li;
}

}  // namespace vtpu::bridge
