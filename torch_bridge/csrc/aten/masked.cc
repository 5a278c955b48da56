// Ops whose result size only the data gives: torch.nonzero, masked_select and x[mask]. The count
// of true elements is read first (a synchronisation, as on every accelerator: mask.sum().item()),
// then the chip compacts the mask's true positions (kernels/compose/compaction.h) and gathers what they
// name: coordinates for nonzero, rows of x for x[mask] (a mask over x's leading dims; the index op
// moves other dims first), elements for masked_select. Masks past kCompactionMaxElements (2^24)
// run on the CPU.
#include "torch_bridge/csrc/aten/masked.h"

#include <torch/library.h>

#include "kernels/compose/compaction.h"
#include "torch_bridge/csrc/aten/complex.h"
#include "torch_bridge/csrc/aten/variants.h"
#include "torch_bridge/csrc/record/recorder.h"

namespace vtpu::bridge {
namespace {

using kernels::DType;
using kernels::ExprOp;
using kernels::Graph;

// How many elements of a device bool mask hold (a synchronisation).
int64_t true_count(const at::Tensor& mask) { return mask.sum().item<int64_t>(); }

// [n, dims] f32: element i's coordinate along each dim of `shape` (an iota broadcast over the others).
int coordinate_table(Graph& g, const std::vector<int64_t>& shape, const char* op) {
  const int64_t dims = static_cast<int64_t>(shape.size());
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<int> maps;
  for (int64_t k = 0; k < dims; ++k) {
    std::vector<int64_t> along(dims, 1);
    along[k] = shape[k];
    const int coordinate = g.binary(ExprOp::Add, g.full({shape, DType::F32}, 0, op),
                                    g.reshape(g.iota({{shape[k]}, DType::F32}, op), along, op), op);
    maps.push_back(g.reshape(coordinate, {n, 1}, op));
  }
  return dims == 1 ? maps[0] : g.concat(maps, 1, op);
}

// The largest coordinate along any dim of `shape`: the bound of nonzero's int64 results.
int64_t largest_coordinate(const std::vector<int64_t>& shape) {
  int64_t largest = 1;
  for (int64_t s : shape) largest = std::max(largest, s);
  return largest - 1;
}

// torch.nonzero: [count, ndim] int64 coordinates, row-major order.
at::Tensor tpu_nonzero(const at::Tensor& self) {
  if (self.scalar_type() == at::kComplexFloat) return tpu_nonzero(complex::truth(self));
  const CpuFn cpu = [](const std::vector<at::Tensor>& c) { return at::nonzero(c[0]); };
  // Only the mask self != 0 reaches the kernels: int64 compares exactly (as word pairs).
  const bool comparable = chip_dtype(self.scalar_type()) || self.scalar_type() == at::kLong;
  if (self.numel() > kernels::kCompactionMaxElements || !comparable) {
    return run_on_cpu("nonzero", {self}, cpu, "masks past the compaction limit or dtypes without kernels");
  }
  if (self.dim() == 0) {  // no coordinates: one empty row where the element is nonzero, none where it is zero
    return at::empty({true_count(self.scalar_type() == at::kBool ? self : self.ne(0)), 0}, self.options().dtype(at::kLong));
  }
  const at::Tensor mask = self.scalar_type() == at::kBool ? self : self.ne(0);
  const int64_t count = true_count(mask), dims = self.dim();
  if (count == 0) return at::empty({0, dims}, self.options().dtype(at::kLong));
  const std::vector<int64_t> shape = self.sizes().vec();
  const at::Tensor words = record("nonzero", {mask}, at::kInt, [&](Graph& g, const std::vector<int>& v) {
    const int table = coordinate_table(g, shape, "nonzero");
    const int at = g.cast(kernels::true_positions(g, v[0], count), DType::I32, "nonzero");
    return int64_words(g, g.cast(g.gather(table, at, false, "nonzero"), DType::I32, "nonzero"));
  }, [cpu, self](const std::vector<at::Tensor>&) { return cpu({self.cpu()}).to(at::kInt); });
  return as_int64(words, largest_coordinate(shape)).view({count, dims});
}

// torch.nonzero_static: the first `size` rows of nonzero's coordinates, rows of fill_value past
// the count; a fixed shape, so nothing is read back (no synchronisation).
at::Tensor tpu_nonzero_static(const at::Tensor& self, c10::SymInt size_sym, int64_t fill_value) {
  const int64_t size = size_sym.expect_int();
  TORCH_CHECK(size >= 0, "nonzero_static: 'size' must be an non-negative integer");
  const CpuFn cpu = [size, fill_value](const std::vector<at::Tensor>& c) { return at::nonzero_static(c[0], size, fill_value); };
  const int64_t dims = self.dim();
  const auto options = self.options().dtype(at::kLong);
  if (size == 0 || dims == 0) return at::empty({size, dims}, options);  // no elements to write
  if (self.scalar_type() == at::kComplexFloat) return tpu_nonzero_static(complex::truth(self), size, fill_value);
  const bool comparable = chip_dtype(self.scalar_type()) || self.scalar_type() == at::kLong;
  const int64_t magnitude = fill_value < 0 ? -fill_value : fill_value;
  if (self.numel() > kernels::kCompactionMaxElements || !comparable || magnitude >= (int64_t{1} << 24)) {
    return run_on_cpu("nonzero_static", {self}, cpu, "masks past the compaction limit, dtypes without kernels or a fill value past 2^24");
  }
  if (self.numel() == 0) return at::full({size, dims}, fill_value, options);
  const at::Tensor mask = self.scalar_type() == at::kBool ? self : self.ne(0);
  const std::vector<int64_t> shape = self.sizes().vec();
  const at::Tensor words = record("nonzero_static", {mask}, at::kInt, [&](Graph& g, const std::vector<int>& v) {
    const int table = coordinate_table(g, shape, "nonzero_static");
    const int position = g.reshape(kernels::first_true_positions(g, v[0], size), {size, 1}, "nonzero_static");
    const int at = g.cast(g.binary_scalar(ExprOp::Max, position, 0, false, "nonzero_static"), DType::I32, "nonzero_static");
    const int coordinates = g.gather(table, g.reshape(at, {size}, "nonzero_static"), false, "nonzero_static");
    const int missing = g.binary_scalar(ExprOp::Lt, position, 0, false, "nonzero_static");
    const int rows = g.where(missing, g.full({{1}, DType::F32}, double(fill_value), "nonzero_static"), coordinates, "nonzero_static");
    return int64_words(g, g.cast(rows, DType::I32, "nonzero_static"));
  }, [cpu, self](const std::vector<at::Tensor>&) { return cpu({self.cpu()}).to(at::kInt); });
  return as_int64(words, std::max(largest_coordinate(shape), magnitude)).view({size, dims});
}

at::Tensor tpu_masked_select(const at::Tensor& self, const at::Tensor& mask) {
  const auto shape = at::infer_size(self.sizes(), mask.sizes());
  const at::Tensor x = self.expand(shape), m = mask.expand(shape);
  if (self.scalar_type() == at::kComplexFloat) {  // each selected element's (re, im) pair
    auto paired = shape;
    paired.push_back(2);
    const at::Tensor pairs = complex::as_pairs(x), pair_mask = m.unsqueeze(-1).expand(paired);
    return complex::from_pairs(tpu_masked_select(pairs, pair_mask).view({-1, 2}));
  }
  if (auto rows = masked_rows(x.contiguous(), m.contiguous())) return rows->reshape({-1});
  return run_on_cpu("masked_select", {self, mask}, [](const std::vector<at::Tensor>& c) { return at::masked_select(c[0], c[1]); },
                    "masks past the compaction limit or dtypes without kernels");
}

// torch's checks, in its words: out keeps self's dtype and shares no memory with self or mask.
at::Tensor& tpu_masked_select_out(const at::Tensor& self, const at::Tensor& mask, at::Tensor& out) {
  TORCH_CHECK(self.scalar_type() == out.scalar_type(), "masked_select(): self and result must have the same scalar type");
  at::assert_no_internal_overlap(out);
  check_out_apart(out, self);
  check_out_apart(out, mask);
  return write_out(out, tpu_masked_select(self, mask));
}

}  // namespace

std::optional<at::Tensor> masked_rows(const at::Tensor& self, const at::Tensor& mask) {
  const bool words = self.scalar_type() == at::kLong;
  if (mask.scalar_type() != at::kBool || mask.dim() == 0 || mask.dim() > self.dim() ||
      !mask.sizes().equals(self.sizes().slice(0, mask.dim())) || mask.numel() > kernels::kCompactionMaxElements ||
      (!words && !chip_dtype(self.scalar_type())) || !mask.device().is_privateuseone()) {
    return std::nullopt;
  }
  const int64_t n = mask.numel(), width = self.numel() / std::max<int64_t>(n, 1);
  std::vector<int64_t> shape = {true_count(mask)};
  shape.insert(shape.end(), self.sizes().begin() + mask.dim(), self.sizes().end());
  if (shape[0] == 0 || width == 0) return at::empty(shape, self.options());
  const int64_t count = shape[0];
  // rows of x, int64 as their int32 words
  const at::Tensor table = words ? int64_word_pairs(self).view({n, 2 * width}) : self.reshape({n, width});
  const at::Tensor picked = record("index", {table, mask}, table.scalar_type(), [&](Graph& g, const std::vector<int>& v) {
    const int at = g.cast(kernels::true_positions(g, v[1], count, "index"), DType::I32, "index");
    return g.gather(v[0], at, false, "index");
  }, [self, mask, words](const std::vector<at::Tensor>&) {
    const at::Tensor rows = self.cpu().index({mask.cpu()});
    return words ? rows.reshape({rows.size(0), -1}).view(at::kInt) : rows;
  });
  if (!words) return picked.view(shape);
  at::Tensor out = as_int64(picked.view({count, width, 2}).contiguous()).view(shape);
  set_int64_bound(out, int64_bound_of(self));
  return out;
}

// masked_scatter_: the mask's true positions, in order, take source's leading elements; an
// index_put with the (broadcast) mask, whose count is read back there.
at::Tensor& tpu_masked_scatter_(at::Tensor& self, const at::Tensor& mask, const at::Tensor& source) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_scatter_ only supports boolean masks, but got mask with dtype ", mask.scalar_type());
  TORCH_CHECK(self.scalar_type() == source.scalar_type(), "masked_scatter_: expected self and source to have same dtypes but got ",
              self.scalar_type(), " and ", source.scalar_type());
  const at::Tensor expanded = mask.expand(self.sizes());
  const int64_t count = expanded.sum().item<int64_t>();
  TORCH_CHECK(count <= source.numel(), "masked_scatter: expected source to have at least ", count, " elements, got ", source.numel());
  if (count == 0) return self;
  return self.index_put_({expanded.to(self.device())}, source.reshape({-1}).narrow(0, 0, count));
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("masked_scatter_", tpu_masked_scatter_);
  m.impl("nonzero", tpu_nonzero);
  m.impl("nonzero.out", Variants<tpu_nonzero>::out);
  m.impl("nonzero_static", tpu_nonzero_static);
  m.impl("masked_select", tpu_masked_select);
  m.impl("masked_select.out", tpu_masked_select_out);
}

}  // namespace vtpu::bridge
