// Order statistics by sorting on the chip (order_statistics.cc); topk_by_sort serves topk's
// k past what its own kernel unrolls (iota.cc).
#pragma once

#include <ATen/ATen.h>

#include <tuple>

namespace vtpu::bridge {

// The first k of a stable sort of `self` along `dim` (descending when `largest`): values, indices.
std::tuple<at::Tensor, at::Tensor> topk_by_sort(const at::Tensor& self, int64_t k, int64_t dim, bool largest);

}  // namespace vtpu::bridge
