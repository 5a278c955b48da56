#include "torch_bridge/csrc/record/layout.h"

#include <algorithm>
#include <numeric>

#include "torch_bridge/csrc/record/cpu_scalar.h"

namespace vtpu::bridge {

DimOrder elementwise_order(const std::vector<at::Tensor>& operands, at::IntArrayRef shape) {
  const int64_t ndim = static_cast<int64_t>(shape.size());
  DimOrder identity(ndim);
  std::iota(identity.begin(), identity.end(), 0);
  if (ndim < 2) return identity;
  // Every elementwise op asks: the common case (all contiguous, no broadcast) returns before any
  // strides are gathered.
  const auto counts = [](const at::Tensor& t) { return t.defined() && !is_cpu_scalar(t); };
  if (std::all_of(operands.begin(), operands.end(),
                  [&](const at::Tensor& t) { return !counts(t) || (t.is_contiguous() && t.sizes().equals(shape)); })) {
    return identity;
  }
  // Each operand's strides over the result's dims: 0 where it broadcasts (torch's compute_strides).
  std::vector<std::vector<int64_t>> strides;
  for (const auto& t : operands) {
    if (!counts(t)) continue;
    std::vector<int64_t> s(ndim, 0);
    const int64_t offset = ndim - t.dim();
    for (int64_t d = 0; d < t.dim(); ++d) {
      s[offset + d] = t.size(d) == 1 && shape[offset + d] != 1 ? 0 : t.stride(d);
    }
    strides.push_back(std::move(s));
  }
  // TensorIterator's insertion sort, innermost dim first, with its three-way comparison.
  const auto should_swap = [&](int64_t dim0, int64_t dim1) {
    for (const auto& s : strides) {
      const int64_t s0 = s[dim0], s1 = s[dim1];
      if (s0 == 0 || s1 == 0) continue;
      if (s0 < s1) return -1;
      if (s0 > s1) return 1;
      if (shape[dim0] > shape[dim1]) return 1;
    }
    return 0;
  };
  DimOrder perm(ndim);  // innermost first
  for (int64_t i = 0; i < ndim; ++i) perm[i] = ndim - 1 - i;
  for (int64_t i = 1; i < ndim; ++i) {
    int64_t dim1 = i;
    for (int64_t dim0 = i - 1; dim0 >= 0; --dim0) {
      const int comparison = should_swap(perm[dim0], perm[dim1]);
      if (comparison > 0) {
        std::swap(perm[dim0], perm[dim1]);
        dim1 = dim0;
      } else if (comparison < 0) {
        break;
      }
    }
  }
  std::reverse(perm.begin(), perm.end());
  return perm;
}

std::optional<DimOrder> dense_order(const at::Tensor& t) {
  if (!t.is_non_overlapping_and_dense()) return std::nullopt;
  // Dims of size 1 have no stride that matters: they keep their places, the others are sorted
  // into the free places by stride (distinct: the tensor does not overlap).
  DimOrder order(t.dim()), sized;
  for (int64_t d = 0; d < t.dim(); ++d) {
    order[d] = d;
    if (t.size(d) != 1) sized.push_back(d);
  }
  std::vector<int64_t> places = sized;
  std::sort(sized.begin(), sized.end(), [&](int64_t a, int64_t b) { return t.stride(a) > t.stride(b); });
  for (size_t i = 0; i < places.size(); ++i) order[places[i]] = sized[i];
  return order;
}

bool is_identity(const DimOrder& order) {
  for (size_t i = 0; i < order.size(); ++i) {
    if (order[i] != static_cast<int64_t>(i)) return false;
  }
  return true;
}

DimOrder inverse(const DimOrder& order) {
  DimOrder inv(order.size());
  for (size_t i = 0; i < order.size(); ++i) inv[order[i]] = static_cast<int64_t>(i);
  return inv;
}

at::Tensor in_order(const at::Tensor& t, const DimOrder& order) {
  if (is_cpu_scalar(t)) return t;
  at::Tensor full = t;
  while (full.dim() < static_cast<int64_t>(order.size())) full = full.unsqueeze(0);
  return full.permute(order);
}

}  // namespace vtpu::bridge
