// torch.sort (and so argsort, msort) on the chip (kernels/compose/sort.h): short rows by counting (n^2
// compares per row: mixture-of-experts routing), long ones (a vocabulary, for top-p sampling) by
// a bitonic network. f32, bf16, int8 and bool values, and int64 ones of known magnitude below
// 2^24 (expert ids), all exact in f32. The sort is stable whether or not `stable` is asked for
// (torch's CPU gives the same order); NaN sorts last ascending and first descending, as torch's.
// int32 values of any magnitude sort as two stable passes over their 16-bit halves (a radix sort:
// flex_attention's block masks argsort int32 rows). Other dtypes, int64 values of unknown
// magnitude and more than 2^24 elements run on the CPU when the fallback is on.
#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>
#include <torch/library.h>

#include <algorithm>

#include "kernels/compose/sort.h"
#include "torch_bridge/csrc/record/op_support.h"

namespace vtpu::bridge {
namespace {

using kernels::DType;
using kernels::Graph;

// Why this call stays off the chip (empty: it does not).
std::string unsupported(const at::Tensor& self, int64_t n) {
  const auto t = self.scalar_type();
  if (t == at::kLong) {
    const auto bound = int64_bound_of(self);
    if (!bound || *bound >= (int64_t{1} << 24)) return "int64 values of unknown magnitude, or beyond 2^24";
  } else if (!is_chip_float(t) && t != at::kChar && t != at::kBool && t != at::kInt) {
    return "a dtype the chip does not sort exactly (f32, bf16, f16, int8, int32, bool, small int64)";
  }
  if (n > kernels::kBitonicMaxLength || self.numel() > kernels::kBitonicMaxLength) return "more than 2^24 elements";
  return {};
}

// f32 [rows, n] values of `rows` (int64 through its int32 words, narrowed within its bound).
int as_f32(Graph& g, int v, const at::Tensor& rows) {
  if (rows.scalar_type() != at::kLong) return g.node(v).type.dtype == DType::F32 ? v : g.cast(v, DType::F32, "sort");
  const int narrow = g.int64_narrow(v, *int64_bound_of(rows) + 1, "sort");
  return g.cast(g.reshape(narrow, {rows.size(0), rows.size(1)}, "sort"), DType::F32, "sort");
}

std::tuple<at::Tensor, at::Tensor> tpu_sort_stable(const at::Tensor& self, std::optional<bool> stable, int64_t dim_arg,
                                                   bool descending);

// int32 values: sorted by their low halves (0..65535), then stably by their high halves
// (-32768..32767), both exact in f32. The second pass keeps the first's order among equal high
// halves, so the result is the stable order of the whole values (ascending or descending alike).
std::tuple<at::Tensor, at::Tensor> sort_int32_by_halves(const at::Tensor& self, int64_t d, bool descending) {
  const at::Tensor low_bits = at::bitwise_and(self, 0xFFFF);
  const at::Tensor low = low_bits.to(at::kFloat);
  // self - low_bits is a multiple of 2^16 below 2^31 in magnitude: exact in f32, as is its scaling
  const at::Tensor high = (self - low_bits).to(at::kFloat) * (1.0 / 65536);
  const at::Tensor by_low = std::get<1>(tpu_sort_stable(low, true, d, descending));
  const at::Tensor by_high = std::get<1>(tpu_sort_stable(high.gather(d, by_low), true, d, descending));
  const at::Tensor order = by_low.gather(d, by_high);
  return {self.gather(d, order), order};
}

std::tuple<at::Tensor, at::Tensor> tpu_sort_stable(const at::Tensor& self, std::optional<bool> stable, int64_t dim_arg,
                                                   bool descending) {
  const int64_t d = at::maybe_wrap_dim(dim_arg, std::max<int64_t>(self.dim(), 1));
  const int64_t n = self.dim() > 0 ? self.size(d) : 1;
  if (self.dim() == 0 || self.numel() == 0) {  // nothing to order: the values, each at position 0 (or none)
    return {self.clone(), at::zeros(self.sizes(), self.options().dtype(at::kLong))};
  }
  if (const std::string why = unsupported(self, n); !why.empty()) {
    const auto r = run_on_cpu_outputs("sort", {self}, [stable, dim_arg, descending](const std::vector<at::Tensor>& c) {
      auto [values, indices] = at::sort(c[0], stable, dim_arg, descending);
      return std::vector<at::Tensor>{values, indices};
    }, why);
    return {r[0], r[1]};
  }
  if (self.scalar_type() == at::kInt) return sort_int32_by_halves(self, d, descending);
  const at::Tensor moved = self.movedim(d, -1);
  const at::Tensor rows = moved.reshape({-1, n});
  const bool i64 = self.scalar_type() == at::kLong;
  const at::Tensor input = i64 ? index_words(rows) : rows;
  // values then positions, [rows, 2n] f32 (exact: integers below 2^24)
  const at::Tensor packed = record("sort", {input}, at::kFloat, [&](Graph& g, const std::vector<int>& v) {
    const int x = as_f32(g, v[0], rows);
    const bool short_rows = rows.size(0) * n * n <= kernels::kSortMaxPairs;
    const auto sorted = short_rows ? kernels::sort_rows(g, x, descending) : kernels::bitonic_sort_rows(g, x, descending);
    return g.concat({g.reshape(sorted.values, {rows.size(0), n}), g.reshape(sorted.positions, {rows.size(0), n})}, 1, "sort");
  }, [rows, descending](const std::vector<at::Tensor>&) {
    auto [values, indices] = at::sort(rows.cpu(), /*stable=*/true, -1, descending);
    return at::cat({values.to(at::kFloat), indices.to(at::kFloat)}, 1);
  });
  const at::Tensor value_part = packed.narrow(1, 0, n), position_part = packed.narrow(1, n, n);
  const at::Tensor values = i64 ? int64_from_f32("sort", value_part, *int64_bound_of(self)) : value_part.to(self.scalar_type());
  const at::Tensor indices = int64_from_f32("sort", position_part, n - 1);
  return {values.reshape(moved.sizes()).movedim(-1, d).contiguous(), indices.reshape(moved.sizes()).movedim(-1, d).contiguous()};
}

std::tuple<at::Tensor&, at::Tensor&> tpu_sort_values_stable(const at::Tensor& self, std::optional<bool> stable, int64_t dim,
                                                            bool descending, at::Tensor& values, at::Tensor& indices) {
  auto [v, i] = tpu_sort_stable(self, stable, dim, descending);
  write_out(values, v);
  write_out(indices, i);
  return {values, indices};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("sort.stable", tpu_sort_stable);
  m.impl("sort.values_stable", tpu_sort_values_stable);
}

}  // namespace vtpu::bridge
