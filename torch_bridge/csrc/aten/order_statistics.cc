// Order statistics by sorting on the chip (aten/sort.cc): kthvalue, median and nanmedian along a
// dim or over all elements, and topk for k past its rounds (iota.cc: 64 largest, 16 smallest). The
// stable sort puts NaN last ascending and keeps ties in their original order, which gives
// torch's CPU rules: kthvalue counts NaN as the largest value; median returns a row's first NaN
// (value and index) when it has one; nanmedian takes the lower median of the other values and a
// row of NaN only gives its first; topk past its rounds is the first k of a stable descending (or
// ascending) sort, ties the first position first as in the rounds.
#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>
#include <torch/library.h>

#include "torch_bridge/csrc/aten/order_statistics.h"
#include "torch_bridge/csrc/aten/variants.h"
#include "torch_bridge/csrc/record/op_support.h"

namespace vtpu::bridge {

namespace {

struct Selected {
  at::Tensor values, indices;
};

// The elements at sorted positions `position` (int64, the row's shape with dim kept as 1) of
// `self` sorted ascending along `dim`.
Selected select_sorted(const at::Tensor& self, int64_t dim, const at::Tensor& position, bool keepdim) {
  auto [sorted, order] = at::sort(self, /*stable=*/true, dim, /*descending=*/false);
  at::Tensor values = sorted.gather(dim, position), indices = order.gather(dim, position);
  if (!keepdim) {
    values = values.squeeze(dim);
    indices = indices.squeeze(dim);
  }
  return {values, indices};
}

int64_t wrapped(const at::Tensor& self, int64_t dim) { return self.dim() > 0 ? at::maybe_wrap_dim(dim, self.dim()) : 0; }

// A 0-dim input reads as one element along dim 0.
at::Tensor as_rows(const at::Tensor& self) { return self.dim() == 0 ? self.reshape({1}) : self; }

Selected median_along(const at::Tensor& self_in, int64_t dim_arg, bool keepdim, bool ignore_nan) {
  const at::Tensor self = as_rows(self_in);
  const int64_t dim = wrapped(self, dim_arg);
  const int64_t n = self.size(dim);
  TORCH_CHECK(n > 0, ignore_nan ? "nanmedian" : "median", "(): cannot compute of an empty dim");
  const at::Tensor nans = at::isnan(self).sum(dim, /*keepdim=*/true);  // int64, the row's NaN count
  at::Tensor position;
  if (ignore_nan) {  // the lower median of the non-NaN values; a row of NaN gives its first
    // halved in f32 (exact: positions below 2^24), not as int64 division
    position = ((n - nans - 1).clamp_min(0).to(at::kFloat) * 0.5).floor().to(at::kLong);
  } else {  // the lower median, or the row's first NaN (sorted to n - nans)
    position = at::where(nans > 0, n - nans, at::full_like(nans, (n - 1) / 2));
  }
  Selected s = select_sorted(self, dim, position, keepdim);
  if (self_in.dim() == 0) s = {s.values.reshape({}), s.indices.reshape({})};
  return s;
}

std::tuple<at::Tensor&, at::Tensor&> write(const Selected& s, at::Tensor& values, at::Tensor& indices) {
  write_out(values, s.values);
  write_out(indices, s.indices);
  return {values, indices};
}

std::tuple<at::Tensor&, at::Tensor&> tpu_kthvalue_values(const at::Tensor& self_in, int64_t k, int64_t dim_arg, bool keepdim,
                                                         at::Tensor& values, at::Tensor& indices) {
  check_out_apart(values, self_in);  // torch's: values are written while self is still read
  const at::Tensor self = as_rows(self_in);
  const int64_t dim = wrapped(self, dim_arg);
  TORCH_CHECK(k >= 1 && k <= self.size(dim), "kthvalue(): selected number k out of range for dimension ", dim_arg);
  std::vector<int64_t> shape(self.sizes().begin(), self.sizes().end());
  shape[dim] = 1;
  Selected s = select_sorted(self, dim, at::full(shape, k - 1, self.options().dtype(at::kLong)), keepdim || self_in.dim() == 0);
  if (self_in.dim() == 0) s = {s.values.reshape({}), s.indices.reshape({})};
  return write(s, values, indices);
}

std::tuple<at::Tensor&, at::Tensor&> tpu_median_dim_values(const at::Tensor& self, int64_t dim, bool keepdim,
                                                           at::Tensor& values, at::Tensor& indices) {
  return write(median_along(self, dim, keepdim, false), values, indices);
}

std::tuple<at::Tensor&, at::Tensor&> tpu_nanmedian_dim_values(const at::Tensor& self, int64_t dim, bool keepdim,
                                                              at::Tensor& values, at::Tensor& indices) {
  return write(median_along(self, dim, keepdim, true), values, indices);
}

at::Tensor tpu_median(const at::Tensor& self) {
  TORCH_CHECK(self.numel() > 0, "median() input tensor cannot be empty");
  return median_along(self.reshape({-1}), 0, false, false).values.reshape({});
}

at::Tensor tpu_nanmedian(const at::Tensor& self) {
  TORCH_CHECK(self.numel() > 0, "nanmedian() input tensor cannot be empty");
  return median_along(self.reshape({-1}), 0, false, true).values.reshape({});
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> topk_by_sort(const at::Tensor& self, int64_t k, int64_t dim, bool largest) {
  auto [sorted, order] = at::sort(self, /*stable=*/true, dim, /*descending=*/largest);
  return {sorted.narrow(dim, 0, k).contiguous(), order.narrow(dim, 0, k).contiguous()};
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("kthvalue.values", tpu_kthvalue_values);
  m.impl("median.dim_values", tpu_median_dim_values);
  m.impl("nanmedian.dim_values", tpu_nanmedian_dim_values);
  m.impl("median", tpu_median);
  m.impl("nanmedian", tpu_nanmedian);
}

}  // namespace vtpu::bridge
