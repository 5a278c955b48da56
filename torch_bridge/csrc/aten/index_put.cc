// x[index] = values (index_put_, which torch routes through _index_put_impl_) on the chip:
//  - a boolean mask over x's leading dims with one value (`x[mask] = 0`, `x[mask] += v`): a
//    `where` of the mask; int64 x (input ids, position ids) as its int32 word pairs.
//  - one integer index tensor on dim 0 with accumulate=True (`x.index_put_((idx,), v,
//    accumulate=True)`, autograd's backward of x[idx]): x plus a scatter-add of the value rows
//    into zeros (kernels/generators/scatter_add.h, in index order).
//  - one integer index tensor on dim 0 without accumulating (`x[idx] = v`, a permutation's
//    inverse `inv[perm] = arange(n)`): each row is gathered from the values at the last index
//    position naming it (a scatter-max of positions), so repeated indices keep the CPU's last
//    write, in any dtype.
// Negative indices count from the end; one outside the rows raises IndexError at the next
// synchronisation. Masks with several values (a count only the data gives) and other index
// layouts run on the CPU.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <cmath>

#include "torch_bridge/csrc/aten/complex.h"
#include "torch_bridge/csrc/aten/int64.h"
#include "torch_bridge/csrc/aten/integer_accumulate.h"
#include "torch_bridge/csrc/aten/linear_index.h"
#include "torch_bridge/csrc/record/op_support.h"
#include "torch_bridge/csrc/record/recorder.h"

namespace vtpu::bridge {
namespace {

using kernels::DType;
using kernels::ExprOp;
using kernels::Graph;

// `mask` with trailing dims of size 1, so it broadcasts over the dims of self it does not cover.
at::Tensor mask_over(const at::Tensor& mask, int64_t dims) {
  std::vector<int64_t> shape = mask.sizes().vec();
  shape.resize(dims, 1);
  return mask.reshape(shape);
}

// self[mask] = value (or += with accumulate), value one element.
// A host value is cast on the host (an int64 one cannot be cast on the chip), then uploaded.
at::Tensor masked_put(const at::Tensor& self, const at::Tensor& mask, const at::Tensor& values, bool accumulate) {
  const at::Tensor value = (values.is_cpu() ? values.to(self.scalar_type()) : values).reshape({1}).to(self.device());
  if (self.scalar_type() != at::kLong) {
    const at::Tensor typed = value.scalar_type() == self.scalar_type() ? value : value.to(self.scalar_type());
    return at::where(mask_over(mask, self.dim()), accumulate ? self + typed : typed, self);
  }
  return int64_where(mask_over(mask, self.dim()), value, self);  // word pairs selected together
}

// The row each index element names, negative ones counting from the end (int32 [n]); rows past
// either end stay outside [0, rows), where the scatter-add kernel traps.
int target_rows(Graph& g, int words, bool int64_index, int64_t rows) {
  const int at = int64_index ? g.int64_narrow(words, int64_t{1} << 31, "index_put_") : words;
  return g.where(g.binary_scalar(ExprOp::Lt, at, 0, false, "index_put_"),
                 g.binary_scalar(ExprOp::Add, at, double(rows), false, "index_put_"), at, "index_put_");
}

// The shape values take for an index on dim 0: the index's dims, then self's other dims.
std::vector<int64_t> indexed_shape(const at::Tensor& self, const at::Tensor& index) {
  std::vector<int64_t> shape = index.sizes().vec();
  shape.insert(shape.end(), self.sizes().begin() + 1, self.sizes().end());
  return shape;
}

// self + zeros(self) with each row of values added at its index (dim 0), in order.
at::Tensor accumulate_rows(const at::Tensor& self, const at::Tensor& index, const at::Tensor& values) {
  const int64_t n = index.numel(), rows = self.size(0), width = self.numel() / std::max<int64_t>(rows, 1);
  const std::vector<int64_t> value_shape = indexed_shape(self, index);
  const at::Tensor src = values.to(self.device(), self.scalar_type()).expand(value_shape).reshape({n, width});
  const at::Tensor flat = index.reshape({n});
  const bool i64 = flat.scalar_type() == at::kLong;
  const CpuFn cpu = [index, value_shape](const std::vector<at::Tensor>& c) {
    c10::List<std::optional<at::Tensor>> host({std::optional(index.cpu())});
    return c[0].index_put(host, c[1].reshape(value_shape), true);
  };
  return record("index_put_", {self.reshape({rows, width}), src, index_words(flat)}, self.scalar_type(),
                [&](Graph& g, const std::vector<int>& v) {
    const int at = target_rows(g, v[2], i64, rows);
    return g.binary(ExprOp::Add, v[0], g.scatter_add(v[1], at, /*index_pairs=*/false, rows, -1, "index_put_"), "index_put_");
  }, [cpu, self](const std::vector<at::Tensor>& c) { return cpu({self.cpu(), c[1]}).reshape(c[0].sizes()); }).view(self.sizes());
}

// The last position of the index naming each of self's rows (torch's CPU kernel writes in index
// order, so that write stays), -inf where none does: a scatter-max of the positions (f32, exact
// below 2^24), f32 [rows, 1] on the chip.
at::Tensor last_writer(const at::Tensor& self, const at::Tensor& index) {
  const at::Tensor flat = index.reshape({-1});
  const int64_t n = flat.numel(), rows = self.size(0);
  const bool i64 = flat.scalar_type() == at::kLong;
  const at::Tensor positions = at::arange(n, self.options().dtype(at::kFloat));
  return record("index_put_", {index_words(flat), positions}, at::kFloat, [&](Graph& g, const std::vector<int>& v) {
    return g.reshape(g.scatter_combine(g.reshape(v[1], {n, 1}, "index_put_"), target_rows(g, v[0], i64, rows), false, rows,
                                       ExprOp::Max, "index_put_"),
                     {rows, 1}, "index_put_");
  }, [flat, rows](const std::vector<at::Tensor>& c) {
    const at::Tensor given = flat.cpu().to(at::kLong).reshape({-1, 1});
    const at::Tensor at = at::where(given < 0, given + rows, given);  // negative indices from the end
    return at::full({rows, 1}, -INFINITY).scatter_reduce(0, at, c[1].cpu().reshape({-1, 1}), "amax");
  });
}

// self with the rows of values written at their indices (dim 0), the last write winning where a
// row is named twice: each written row is gathered from the values at its last writer. Any dtype
// the chip gathers (int64 as word pairs), with no synchronisation.
at::Tensor write_rows(const at::Tensor& self, const at::Tensor& index, const at::Tensor& values) {
  const int64_t n = index.numel(), rows = self.size(0), width = self.numel() / std::max<int64_t>(rows, 1);
  const at::Tensor src = values.to(self.device(), self.scalar_type()).expand(indexed_shape(self, index)).reshape({n, width});
  const at::Tensor winner = last_writer(self, index);
  const at::Tensor written = src.index_select(0, winner.clamp_min(0).to(at::kLong).reshape({rows}));
  return at::where(winner.ge(0), written, self.reshape({rows, width})).view(self.sizes());
}

// Why the chip's paths do not take this call (empty: one of them does).
std::string unsupported(const at::Tensor& self, const std::vector<std::optional<at::Tensor>>& list, const at::Tensor& values,
                        bool accumulate) {
  int64_t given = 0;
  for (const auto& i : list) given += i && i->defined();
  if (given != 1 || !list[0] || !list[0]->defined()) return "boolean masks past the first dim, or with integer indices";
  const at::Tensor& index = *list[0];
  if (self.dim() == 0 || self.numel() == 0 || index.numel() == 0) return "0-d or empty tensors";
  if (index.scalar_type() == at::kBool) {
    if (values.numel() != 1) return "a boolean mask with several values (a count only the data gives)";
    if (index.dim() > self.dim() || !index.sizes().equals(self.sizes().slice(0, index.dim()))) return "a mask of another shape";
    if (self.scalar_type() == at::kLong && (accumulate || (!values.is_cpu() && values.scalar_type() != at::kLong))) {
      return "adding under a mask to int64 tensors, or writing a non-int64 device value into them";
    }
    if (self.scalar_type() != at::kLong && !chip_dtype(self.scalar_type())) return "a dtype without kernels on the chip";
    return {};
  }
  if (index.scalar_type() != at::kLong && index.scalar_type() != at::kInt) return "an index that is neither bool nor int32/int64";
  if (accumulate && !is_chip_float(self.scalar_type()) && !at::isIntegralType(self.scalar_type(), /*includeBool=*/false)) {
    return "accumulating into bool tensors";
  }
  if (!chip_dtype(self.scalar_type()) && self.scalar_type() != at::kLong) return "a dtype without kernels on the chip";
  if (index.numel() > (int64_t{1} << 24)) return "more than 2^24 index elements (their positions are exact in f32 below)";
  return {};
}

at::Tensor& fallback(at::Tensor& self, const std::vector<std::optional<at::Tensor>>& list, const at::Tensor& values,
                     bool accumulate, const std::string& why) {
  const at::Tensor result = run_on_cpu("_index_put_impl_", {self, values}, [list, accumulate](const std::vector<at::Tensor>& c) {
    c10::List<std::optional<at::Tensor>> host;
    for (const auto& i : list) host.push_back(i && i->defined() ? std::optional(i->cpu()) : std::nullopt);
    return c[0].index_put(host, c[1], accumulate);
  }, why);
  self.copy_(result);
  return self;
}

at::Tensor& tpu_index_put_impl_(at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices, const at::Tensor& values,
                                bool accumulate, bool unsafe);

// x[i0, i1, ...] = v (or += with accumulate) with several integer index tensors, or one past the
// first dim (x[:, i]): the one-index form on the flattened block (linear_index.h), the values laid
// out as that block's rows, and the block written back when it is a copy rather than a view of self.
bool put_several(at::Tensor& self, const std::vector<std::optional<at::Tensor>>& list, const at::Tensor& values,
                 bool accumulate, bool unsafe) {
  int64_t given = 0;
  for (const auto& i : list) given += i && i->defined();
  const bool first_dim_only = given == 1 && list[0] && list[0]->defined();
  if (given == 0 || first_dim_only || self.dim() == 0) return false;
  auto li = linear_index(self, list);
  if (!li) return false;
  // torch's result shape of x[indices], which the values broadcast to
  const int64_t k = static_cast<int64_t>(li->dims.size()), b = li->index.dim();
  std::vector<int64_t> rest(li->moved.sizes().begin() + k, li->moved.sizes().end()), result = li->index.sizes().vec();
  result.insert(result.end(), rest.begin(), rest.end());
  const at::Tensor on_chip = values.device() == self.device() ? values : values.to(self.device());
  at::Tensor rows;  // the values as [index shape..., rest...]
  if (li->index_dims_in_place) {  // the index dims sit at dims.front() in torch's result: moved first here
    std::vector<int64_t> placed(rest.begin(), rest.begin() + li->dims.front());
    placed.insert(placed.end(), li->index.sizes().begin(), li->index.sizes().end());
    placed.insert(placed.end(), rest.begin() + li->dims.front(), rest.end());
    std::vector<int64_t> from(b), to(b);
    for (int64_t j = 0; j < b; ++j) from[j] = li->dims.front() + j, to[j] = j;
    rows = on_chip.expand(placed).movedim(from, to);
  } else {
    rows = on_chip.expand(result);
  }
  std::vector<int64_t> row_shape = {li->index.numel()};
  row_shape.insert(row_shape.end(), rest.begin(), rest.end());
  at::Tensor flat = li->flat;
  tpu_index_put_impl_(flat, c10::List<std::optional<at::Tensor>>({std::optional(li->index.reshape({-1}))}),
                      rows.reshape(row_shape), accumulate, unsafe);
  if (!flat.is_alias_of(self)) li->moved.copy_(flat.view(li->moved.sizes()));
  return true;
}

// torch's expandTensors: a boolean mask over k dims stands for k integer indices, the coordinates
// of its true positions (nonzero on the chip; the count is read back, a sync point as on any
// accelerator). Not taken for one mask and one value, which masked_put writes without a count.
std::optional<std::vector<std::optional<at::Tensor>>> masks_as_coordinates(const at::Tensor& self,
                                                                            const std::vector<std::optional<at::Tensor>>& list,
                                                                            const at::Tensor& values) {
  int64_t given = 0, masks = 0;
  for (const auto& i : list) {
    given += i && i->defined();
    masks += i && i->defined() && i->scalar_type() == at::kBool;
  }
  if (masks == 0 || (given == 1 && masks == 1 && list[0] && list[0]->defined() && values.numel() == 1)) return std::nullopt;
  std::vector<std::optional<at::Tensor>> out;
  for (const auto& i : list) {
    if (!(i && i->defined() && i->scalar_type() == at::kBool)) {
      out.push_back(i);
      continue;
    }
    const at::Tensor coordinates = at::nonzero(i->device() == self.device() ? *i : i->to(self.device()));
    for (int64_t j = 0; j < i->dim(); ++j) out.push_back(coordinates.select(1, j));
  }
  return out;
}

at::Tensor& tpu_index_put_impl_(at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices, const at::Tensor& values,
                                bool accumulate, bool unsafe) {
  if (self.scalar_type() == at::kComplexFloat && values.scalar_type() == at::kComplexFloat && !self.is_conj() && !self.is_neg()) {
    // complex64: each element's (re, im) pair written together, through the pairs view of self
    at::Tensor pairs = at::view_as_real(self);
    tpu_index_put_impl_(pairs, indices, complex::as_pairs(values), accumulate, unsafe);
    return self;
  }
  const std::vector<std::optional<at::Tensor>> list(indices.begin(), indices.end());
  if (auto expanded = masks_as_coordinates(self, list, values)) {
    for (const auto& i : *expanded) {
      if (i && i->defined() && i->numel() == 0) return self;  // no true position: nothing is written
    }
    return tpu_index_put_impl_(self, c10::List<std::optional<at::Tensor>>(*expanded), values, accumulate, unsafe);
  }
  if (put_several(self, list, values, accumulate, unsafe)) return self;
  if (self.dim() > 0 && list.size() == 1 && list[0] && list[0]->defined() && list[0]->scalar_type() != at::kBool &&
      (list[0]->numel() == 0 || (self.numel() == 0 && self.size(0) > 0))) {
    // No row named, or every row empty (an empty batch's col2im): nothing is written
    const std::vector<int64_t> shape = indexed_shape(self, *list[0]);
    TORCH_CHECK(at::is_expandable_to(values.sizes(), shape), "shape mismatch: value tensor of shape ", values.sizes(),
                " cannot be broadcast to indexing result of shape ", c10::IntArrayRef(shape));
    return self;
  }
  if (const std::string why = unsupported(self, list, values, accumulate); !why.empty()) return fallback(self, list, values, accumulate, why);
  const at::Tensor& index = *list[0];
  const at::Tensor on_chip = index.device() == self.device() ? index : index.to(self.device());
  if (index.scalar_type() == at::kBool) {
    self.copy_(masked_put(self, on_chip, values, accumulate));
  } else if (accumulate && !is_chip_float(self.scalar_type())) {  // integers: exact sums (integer_accumulate.h)
    const at::Tensor src = values.to(self.device(), self.scalar_type()).expand(indexed_shape(self, index)).contiguous();
    const auto f32_scatter = [&](const at::Tensor& f) { return accumulate_rows(at::zeros(self.sizes(), f.options()), on_chip, f); };
    const auto sums = integer_accumulate(self, src, f32_scatter);
    const char* why = "integer sums not known to stay exact (int64 past 2^31, or over 65793 int32 values)";
    if (!sums) return fallback(self, list, values, accumulate, why);
    self.copy_(*sums);
  } else if (accumulate) {
    self.copy_(accumulate_rows(self, on_chip, values));
  } else {
    self.copy_(write_rows(self, on_chip, values));
  }
  return self;
}

// put_: the flat view's index_put (negative indices count from the end there too); a
// non-contiguous self is written through a contiguous copy.
at::Tensor& tpu_put_(at::Tensor& self, const at::Tensor& index, const at::Tensor& source, bool accumulate) {
  TORCH_CHECK_INDEX(index.numel() == source.numel(), "put_(): Expected source and index to have the same number of elements, but got source.numel() = ",
                    source.numel(), ", index.numel() = ", index.numel());
  if (index.numel() == 0) return self;
  at::Tensor flat = self.is_contiguous() ? self.view({-1}) : self.contiguous().view({-1});
  flat.index_put_({index.reshape({-1})}, source.reshape({-1}), accumulate);
  if (!flat.is_alias_of(self)) self.copy_(flat.view(self.sizes()));
  return self;
}

at::Tensor tpu_put(const at::Tensor& self, const at::Tensor& index, const at::Tensor& source, bool accumulate) {
  at::Tensor out = self.clone();
  return tpu_put_(out, index, source, accumulate);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_index_put_impl_", tpu_index_put_impl_);
  m.impl("put_", tpu_put_);
  m.impl("put", tpu_put);
}

}  // namespace vtpu::bridge
