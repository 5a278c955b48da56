// Indexing on the chip: index_select (embeddings), x[idx] with one integer index tensor and
// x[i, j, ...] with several, as gathers whose indices are read and range-checked on the chip.
#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>

#include <algorithm>

#include <torch/library.h>

#include "torch_bridge/csrc/aten/complex.h"
#include "torch_bridge/csrc/aten/linear_index.h"
#include "torch_bridge/csrc/aten/masked.h"
#include "torch_bridge/csrc/aten/variants.h"
#include "torch_bridge/csrc/record/op_support.h"

namespace vtpu::bridge {
namespace {

using kernels::ExprOp;
using kernels::Graph;
using kernels::RowOp;

// index_select (what nn.Embedding lowers to): a gather kernel reads the indices on the chip.
// int64 indices are handed over as their int32 word pairs (a view of the same bytes); an index
// outside the table raises IndexError at the next synchronisation, like a device-side assert on
// other accelerators. Other dims are moved first and back after (strided copies on the chip).
// The int64 tensor a gather of int64_word_pairs(source) picked (indexing leaves the trailing 2
// alone), keeping the source's magnitude bound.
at::Tensor from_word_pairs(const at::Tensor& pairs, const at::Tensor& source) {
  at::Tensor out = as_int64(pairs.contiguous());
  set_int64_bound(out, int64_bound_of(source));
  return out;
}

at::Tensor tpu_index_select(const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  TORCH_CHECK_INDEX(index.dim() <= 1, "index_select(): Index is supposed to be a vector");
  const int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  const CpuFn cpu = [d, index](const std::vector<at::Tensor>& c) { return at::index_select(c[0], d, index.cpu()); };
  const bool i64 = index.scalar_type() == at::kLong;
  TORCH_CHECK_INDEX(i64 || index.scalar_type() == at::kInt, "index_select(): Expected dtype int32 or int64 for index");
  if (self.dim() == 0 && index.numel() == 1) {  // a 0-d input's one element (index 0), 0-d
    return tpu_index_select(self.reshape({1}), 0, index.reshape({1})).reshape({});
  }
  if (self.dim() == 0) return run_on_cpu("index_select", {self}, cpu, "a 0-d input with no index");
  if (self.scalar_type() == at::kLong) return from_word_pairs(tpu_index_select(int64_word_pairs(self), d, index), self);
  if (self.scalar_type() == at::kComplexFloat) return complex::from_pairs(tpu_index_select(complex::as_pairs(self), d, index));
  if (d != 0) return tpu_index_select(self.movedim(d, 0), 0, index).movedim(0, d).contiguous();
  if (!index.device().is_privateuseone()) return run_on_cpu("index_select", {self}, cpu, "indices on the CPU");
  return record("index_select", {self, index_words(index)}, self.scalar_type(), [&](Graph& g, const std::vector<int>& v) {
    return g.gather(v[0], v[1], i64);
  }, cpu);
}

at::Tensor tpu_index(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices);

// x[i0, i1, ...] with several integer index tensors: the one-index gather of the flattened block
// (linear_index.h), its result dims put where torch puts them.
std::optional<at::Tensor> several_indices(const at::Tensor& self, const std::vector<std::optional<at::Tensor>>& list) {
  const auto li = linear_index(self, list);
  if (!li) return std::nullopt;
  const at::Tensor picked = tpu_index(li->flat, c10::List<std::optional<at::Tensor>>({std::optional(li->index)}));
  if (!li->index_dims_in_place) return picked;
  std::vector<int64_t> from(li->index.dim()), place(li->index.dim());
  for (int64_t k = 0; k < li->index.dim(); ++k) {
    from[k] = k;
    place[k] = li->dims.front() + k;
  }
  return picked.movedim(from, place).contiguous();
}

// x[..., idx, ...] with one integer index tensor (the others None): a gather of the indexed dim
// moved first, negative indices counting from the end as torch's indexing has them (checked on
// the chip: out of range traps). Result dims: x's before the index, the index's, x's after.
// Several index tensors become one (several_indices); 0-d inputs run on the CPU.
at::Tensor tpu_index(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices) {
  const std::vector<std::optional<at::Tensor>> list(indices.begin(), indices.end());
  const CpuFn cpu = [list](const std::vector<at::Tensor>& c) {
    c10::List<std::optional<at::Tensor>> host;
    for (const auto& i : list) host.push_back(i && i->defined() ? std::optional(i->cpu()) : std::nullopt);
    return at::index(c[0], host);
  };
  int64_t d = -1, given = 0;
  for (size_t k = 0; k < list.size(); ++k) {
    if (list[k] && list[k]->defined()) {
      d = static_cast<int64_t>(k);
      ++given;
    }
  }
  if (self.scalar_type() == at::kLong && self.dim() > 0 && given > 0) {  // int64 data: its words, gathered alike
    return from_word_pairs(tpu_index(int64_word_pairs(self), indices), self);
  }
  if (self.scalar_type() == at::kComplexFloat && self.dim() > 0 && given > 0) {  // complex: (re, im) pairs alike
    return complex::from_pairs(tpu_index(complex::as_pairs(self), indices));
  }
  if (given > 1 && self.dim() > 0) {
    if (auto linear = several_indices(self, list)) return *linear;
  }
  if (given != 1 || self.dim() == 0) return run_on_cpu("index", {self}, cpu, "several index tensors, or none, or a 0-d input");
  const at::Tensor& idx = *list[d];
  if (idx.scalar_type() == at::kBool && d + idx.dim() <= self.dim()) {
    // x[..., mask, ...]: the masked dims moved first, the count read, rows gathered, and the
    // selected elements' dim put back where the mask was (torch's place for one index tensor).
    std::vector<int64_t> from(idx.dim()), to(idx.dim());
    for (int64_t k = 0; k < idx.dim(); ++k) {
      from[k] = d + k;
      to[k] = k;
    }
    const at::Tensor moved = d == 0 ? self : self.movedim(from, to);
    if (auto rows = masked_rows(moved, idx.device() == self.device() ? idx : idx.to(self.device()))) {
      return d == 0 ? *rows : rows->movedim(0, d).contiguous();
    }
  }
  if (idx.scalar_type() != at::kLong && idx.scalar_type() != at::kInt) {
    return run_on_cpu("index", {self}, cpu, "boolean masks of another shape than the dims they index, or past the compaction limit");
  }
  const at::Tensor index = idx.device() == self.device() ? idx : idx.to(self.device());
  const at::Tensor moved = self.movedim(d, 0);
  const at::Tensor flat = index.reshape({-1});
  std::vector<int64_t> shape = index.sizes().vec();
  shape.insert(shape.end(), moved.sizes().begin() + 1, moved.sizes().end());
  const at::Tensor picked = record("index", {moved, index_words(flat)}, self.scalar_type(), [&](Graph& g, const std::vector<int>& v) {
    return g.gather(v[0], v[1], flat.scalar_type() == at::kLong, "index", /*wrap_negative=*/true);
  }, [moved, flat](const std::vector<at::Tensor>&) {  // the gather's own result: [indices, rest]
    return at::index(moved.cpu(), c10::List<std::optional<at::Tensor>>({std::optional(flat.cpu())}));
  }).view(shape);
  if (d == 0) return picked;
  std::vector<int64_t> from(index.dim()), to(index.dim());
  for (int64_t k = 0; k < index.dim(); ++k) {
    from[k] = k;
    to[k] = d + k;
  }
  return picked.movedim(from, to).contiguous();
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("index_select", tpu_index_select);
  m.impl("index.Tensor", tpu_index);
  m.impl("index.Tensor_out", Variants<tpu_index>::out);
}

}  // namespace vtpu::bridge
