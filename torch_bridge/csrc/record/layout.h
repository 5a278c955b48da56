// The memory layouts torch gives results, so device results have the strides torch's meta
// functions promise. torch.compile's graphs depend on it: AOT autograd traces with meta tensors
// and writes view(...) wherever the meta strides allow one, so a result laid out differently
// breaks the compiled graph ("view size is not compatible with input tensor's size and stride").
//
// The chip's values are dense row-major; a result in another layout is recorded on permuted
// inputs (a permute is a view) and permuted back, so no layout costs a copy.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace vtpu::bridge {

// A dim order, outermost first: order[0] has the largest stride.
using DimOrder = std::vector<int64_t>;

// The order TensorIterator gives an elementwise result of `shape` over `operands` (its
// reorder_dimensions: dims sorted by the operands' strides, the first operand with an opinion
// deciding, broadcast dims ignored, equal strides putting the smaller size inside). Identity when
// every operand is contiguous, as torch's fast path has it.
DimOrder elementwise_order(const std::vector<at::Tensor>& operands, at::IntArrayRef shape);

// The order of a non-overlapping, dense tensor's dims (a permutation of a contiguous buffer);
// nullopt for anything else.
std::optional<DimOrder> dense_order(const at::Tensor& t);

bool is_identity(const DimOrder& order);
DimOrder inverse(const DimOrder& order);

// t viewed with `order`'s dims outermost first; dims missing on the left (broadcasting) are added
// as size-1 dims first. CPU scalars pass through.
at::Tensor in_order(const at::Tensor& t, const DimOrder& order);

}  // namespace vtpu::bridge
