// torch.gather and scatter_add / scatter (a value) on the chip, along any dim. Flattened, index
// element p names self's element base[p] + index[p] * stride(dim), where base (the other dims'
// offsets) depends only on the shapes and is made on the host. The gather kernel
// (kernels/generators/gather.h) then moves one element per row from that flat index (an int64 self: its two
// int32 words); the scatter-add kernel (kernels/generators/scatter_add.h) adds one element per row at it,
// repeated indices in order. The index's int64 words are narrowed on the chip (an index beyond
// int32 traps there) and an index outside [0, size(dim)) is sent past the table, where the kernel
// traps: an index torch would reject raises IndexError at the next synchronisation instead of
// touching a neighbouring row. BERT-style embeddings gather their token type ids this way, and
// gather's backward is a scatter_add. scatter_combined gives scatter_reduce (scatter_reduce.cc)
// the same kernel combining by max, min or product, and scatter of a source tensor its last write.
#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/ScatterGatherChecks.h>
#include <torch/library.h>

#include <cmath>
#include <functional>
#include <limits>

#include "kernels/compose/int64_words.h"
#include "torch_bridge/csrc/aten/complex.h"
#include "torch_bridge/csrc/aten/gather_scatter.h"
#include "torch_bridge/csrc/aten/integer_accumulate.h"
#include "torch_bridge/csrc/aten/variants.h"
#include "torch_bridge/csrc/record/op_support.h"
#include "torch_bridge/csrc/record/recorder.h"

namespace vtpu::bridge {
namespace {

using kernels::DType;
using kernels::ExprOp;
using kernels::Graph;

// The flat offset in a dense `self` of every element of `index` along the dims other than `dim`.
at::Tensor other_dims_offsets(const at::Tensor& self, const at::Tensor& index, int64_t dim) {
  at::Tensor base = at::zeros(index.sizes(), at::TensorOptions().dtype(at::kInt));
  int64_t stride = 1;
  for (int64_t k = self.dim() - 1; k >= 0; --k) {
    if (k != dim) {
      std::vector<int64_t> shape(index.dim(), 1);
      shape[k] = index.size(k);
      base += (at::arange(index.size(k), at::TensorOptions().dtype(at::kInt)) * int32_t(stride)).view(shape);
    }
    stride *= self.size(k);
  }
  return base.reshape({-1});
}

// Why `self` and `index` cannot take the chip's path (empty: they can).
std::string unsupported(const at::Tensor& self, const at::Tensor& index, int64_t dim) {
  if (self.dim() == 0 || index.dim() != self.dim()) return "a 0-d input, or an index of another rank";
  if (index.numel() == 0) return "an empty index";
  if (!index.device().is_privateuseone()) return "indices on the CPU";
  if (self.scalar_type() != at::kLong && !chip_dtype(self.scalar_type())) return "a dtype without kernels on the chip";
  if (self.numel() >= std::numeric_limits<int32_t>::max()) return "more than 2^31 elements";
  for (int64_t k = 0; k < self.dim(); ++k) {
    if (k != dim && index.size(k) > self.size(k)) return "an index larger than the input outside dim (torch rejects it)";
  }
  return {};
}

// How an index along `dim` addresses a dense self (taken before recording: no tensor work may
// run while a graph is being built).
struct DimIndexing {
  bool int64_index;
  int64_t numel, size, stride;
  DimIndexing(const at::Tensor& self, const at::Tensor& index, int64_t dim)
      : int64_index(index.scalar_type() == at::kLong), numel(self.numel()), size(self.size(dim)), stride(1) {
    for (int64_t k = dim + 1; k < self.dim(); ++k) stride *= self.size(k);
  }
};

// The flat element of a dense self each index element names, int32 [n]: out-of-range indices
// point one past the end (the gather and scatter kernels trap there). `words` is the index's
// graph value (int64 as [n, 2] words), `base` other_dims_offsets' value.
int flat_index(Graph& g, int words, int base, const DimIndexing& d, const char* op) {
  const int along = d.int64_index ? g.int64_narrow(words, int64_t{1} << 31, op) : words;
  const int flat = g.binary(ExprOp::Add, g.binary_scalar(ExprOp::Mul, along, double(d.stride), false, op), base, op);
  const int outside = g.binary(ExprOp::Or, g.binary_scalar(ExprOp::Lt, along, 0, false, op),
                               g.binary_scalar(ExprOp::Ge, along, double(d.size), false, op), op);
  return g.where(outside, g.full({{1}, DType::I32}, double(d.numel), op), flat, op);
}

void check_index_dtype(const at::Tensor& index, const char* op) {
  TORCH_CHECK_INDEX(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt, op,
                    "(): Expected dtype int32/int64 for index");
}

// A 0-d self with a one-element index (max(dim)'s backward on a scalar): the 1-d form, reshaped.
bool scalar_form(const at::Tensor& self, const at::Tensor& index) {
  return self.dim() == 0 && index.dim() <= 1 && index.numel() == 1;
}

// torch's own checks of a scatter's dtypes and shapes (ScatterGatherChecks.h), with its messages,
// before the kernels reshape anything.
void check_scatter(const char* op, const at::Tensor& self, int64_t dim_arg, const at::Tensor& index,
                   const std::optional<at::Tensor>& src = std::nullopt) {
  at::native::scatter_gather_dtype_check(op, self, index, src);
  at::native::scatter_shape_check(self, at::maybe_wrap_dim(dim_arg, std::max<int64_t>(self.dim(), 1)), index, src);
}

at::Tensor tpu_gather(const at::Tensor& self, int64_t dim_arg, const at::Tensor& index, bool sparse_grad) {
  check_index_dtype(index, "gather");
  if (index.numel() > 0) {  // (an empty index gives an empty result, whatever its rank, as on the CPU)
    at::native::gather_shape_check(self, at::maybe_wrap_dim(dim_arg, std::max<int64_t>(self.dim(), 1)), index);
  }
  if (scalar_form(self, index)) return tpu_gather(self.reshape({1}), 0, index.reshape({1}), sparse_grad).reshape(index.sizes());
  const int64_t dim = at::maybe_wrap_dim(dim_arg, std::max<int64_t>(self.dim(), 1));
  const CpuFn cpu = [dim, index, sparse_grad](const std::vector<at::Tensor>& c) {
    return at::gather(c[0], dim, index.cpu(), sparse_grad);
  };
  if (index.numel() == 0 && self.dim() > 0 && index.dim() == self.dim()) return at::empty(index.sizes(), self.options());
  if (self.scalar_type() == at::kComplexFloat && self.dim() > 0) {  // complex: each (re, im) pair picked together
    std::vector<int64_t> paired(index.sizes().begin(), index.sizes().end());
    paired.push_back(2);
    return complex::from_pairs(tpu_gather(complex::as_pairs(self), dim, index.unsqueeze(-1).expand(paired), sparse_grad));
  }
  if (const std::string why = unsupported(self, index, dim); !why.empty()) return run_on_cpu("gather", {self}, cpu, why);
  const bool i64 = self.scalar_type() == at::kLong;
  const int64_t numel = self.numel();
  // One element per table row: int64 as its [low, high] int32 words.
  const at::Tensor table = i64 ? int64_word_pairs(self).view({numel, 2}) : self.reshape({numel, 1});
  const at::Tensor base = other_dims_offsets(self, index, dim).to(self.device());
  const DimIndexing indexing(self, index, dim);
  const at::Tensor picked = record("gather", {table, index_words(index), base}, table.scalar_type(),
                                   [&](Graph& g, const std::vector<int>& v) {
    return g.gather(v[0], flat_index(g, v[1], v[2], indexing, "gather"), /*index_pairs=*/false, "gather");
  }, [cpu, self, i64](const std::vector<at::Tensor>&) {  // the kernel's own result: [n, 1], or [n, 2] words
    const at::Tensor out = cpu({self.cpu()}).reshape({-1, 1});
    return i64 ? out.view(at::kInt) : out;
  });
  if (!i64) return picked.view(index.sizes());
  at::Tensor out = as_int64(picked).view(index.sizes());
  set_int64_bound(out, int64_bound_of(self));
  return out;
}

// zeros(self.numel()) with `rows` ([n, 1], one per index element) added at their flat elements,
// viewed as self: what scatter_add adds to self, and (rows of ones) how often each element is hit.
int scattered(Graph& g, int rows, int words, int base, const DimIndexing& d, const std::vector<int64_t>& shape, const char* op) {
  const int at = flat_index(g, words, base, d, op);
  return g.reshape(g.scatter_add(rows, at, /*index_pairs=*/false, d.numel, -1, op), shape, op);
}

// src's elements at index's positions (src may be larger than index in any dim).
at::Tensor leading_block(const at::Tensor& src, const at::Tensor& index) {
  at::Tensor block = src;
  for (int64_t k = 0; k < index.dim(); ++k) block = block.narrow(k, 0, index.size(k));
  return block;
}

// Why scatter_add (and scatter_combined) cannot run on the chip (empty: they can).
std::string scatter_unsupported(const at::Tensor& self, const at::Tensor& index, int64_t dim, const at::Tensor& src) {
  std::string why = unsupported(self, index, dim);
  if (why.empty() && !is_chip_float(self.scalar_type())) why = "scattering into non-float tensors";
  if (why.empty() && src.scalar_type() != self.scalar_type()) why = "a source of another dtype";
  return why;
}

at::Tensor tpu_scatter_add(const at::Tensor& self, int64_t dim_arg, const at::Tensor& index, const at::Tensor& src) {
  check_index_dtype(index, "scatter_add");
  check_scatter("scatter_add", self, dim_arg, index, src);
  if (scalar_form(self, index)) return tpu_scatter_add(self.reshape({1}), 0, index.reshape({1}), src.reshape({-1})).squeeze(0);
  const int64_t dim = at::maybe_wrap_dim(dim_arg, std::max<int64_t>(self.dim(), 1));
  if (self.scalar_type() == at::kComplexFloat && src.scalar_type() == at::kComplexFloat) {  // each plane alike
    return complex::per_plane(self, [&](const at::Tensor& p, int k) { return tpu_scatter_add(p, dim, index, complex::part(src, k)); });
  }
  const CpuFn cpu = [dim, index](const std::vector<at::Tensor>& c) { return at::scatter_add(c[0], dim, index.cpu(), c[1]); };
  if (at::isIntegralType(self.scalar_type(), /*includeBool=*/false) && src.scalar_type() == self.scalar_type()) {
    const auto f32_scatter = [&](const at::Tensor& f) { return at::zeros(self.sizes(), f.options()).scatter_add(dim, index, f); };
    if (auto sums = integer_accumulate(self, src, f32_scatter)) return *sums;
  }
  if (const std::string why = scatter_unsupported(self, index, dim, src); !why.empty()) {
    return run_on_cpu("scatter_add", {self, src}, cpu, why);
  }
  const at::Tensor rows = leading_block(src, index).reshape({index.numel(), 1});
  const at::Tensor base = other_dims_offsets(self, index, dim).to(self.device());
  const DimIndexing indexing(self, index, dim);
  const std::vector<int64_t> shape = self.sizes().vec();
  return record("scatter_add", {self, rows, index_words(index), base}, self.scalar_type(), [&](Graph& g, const std::vector<int>& v) {
    return g.binary(ExprOp::Add, v[0], scattered(g, v[1], v[2], v[3], indexing, shape, "scatter_add"), "scatter_add");
  }, [cpu, src](const std::vector<at::Tensor>& c) { return cpu({c[0], src.cpu()}); });
}

// scatter of one value: every write at an element is the same value, so repeated indices do not
// matter: where(hit count > 0, value, self).
at::Tensor tpu_scatter_value(const at::Tensor& self, int64_t dim_arg, const at::Tensor& index, const at::Scalar& value) {
  check_index_dtype(index, "scatter");
  check_scatter("scatter", self, dim_arg, index);
  if (scalar_form(self, index)) return tpu_scatter_value(self.reshape({1}), 0, index.reshape({1}), value).squeeze(0);
  const int64_t dim = at::maybe_wrap_dim(dim_arg, std::max<int64_t>(self.dim(), 1));
  if (self.scalar_type() == at::kComplexFloat) {  // each plane with its part of the value
    const c10::complex<double> v = value.toComplexDouble();
    return complex::per_plane(self, [&](const at::Tensor& p, int k) { return tpu_scatter_value(p, dim, index, k ? v.imag() : v.real()); });
  }
  const CpuFn cpu = [dim, index, value](const std::vector<at::Tensor>& c) { return at::scatter(c[0], dim, index.cpu(), value); };
  if (const std::string why = unsupported(self, index, dim); !why.empty()) return run_on_cpu("scatter", {self}, cpu, why);
  const at::Tensor base = other_dims_offsets(self, index, dim).to(self.device());
  const DimIndexing indexing(self, index, dim);
  const std::vector<int64_t> shape = self.sizes().vec();
  const int64_t n = index.numel();
  const bool words = self.scalar_type() == at::kLong;  // int64: each word selected on its own
  const at::Tensor out = record("scatter", {words ? int64_word_pairs(self) : self, index_words(index), base},
                                words ? at::kInt : self.scalar_type(), [&](Graph& g, const std::vector<int>& in) {
    const int ones = g.full({{n, 1}, DType::F32}, 1.0, "scatter");
    const int hit = g.binary_scalar(ExprOp::Gt, scattered(g, ones, in[1], in[2], indexing, shape, "scatter"), 0, false, "scatter");
    if (words) {
      const kernels::Int64Words fill = kernels::int64_constant(g, value.toLong(), "scatter");
      return kernels::join_words(g, kernels::select_int64(g, hit, fill, kernels::split_words(g, in[0], "scatter"), "scatter"), "scatter");
    }
    return g.where(hit, g.full({{1}, g.node(in[0]).type.dtype}, value.toDouble(), "scatter"), in[0], "scatter");
  }, [cpu, self](const std::vector<at::Tensor>&) { return cpu({self.cpu()}); });
  return words ? as_int64(out) : out;
}

// scatter of a source tensor. torch's CPU kernel writes in index order, so where an element is
// named twice the last write wins: each element takes the source element at the largest index
// position naming it. Those positions (f32, exact below 2^24) are combined by a scatter-max
// (untouched elements keep -inf), and the winners are gathered from the source's flat block:
// any dtype, repeated indices or not, and no synchronisation.
at::Tensor tpu_scatter_src(const at::Tensor& self, int64_t dim_arg, const at::Tensor& index, const at::Tensor& src) {
  check_index_dtype(index, "scatter");
  check_scatter("scatter", self, dim_arg, index, src);
  if (scalar_form(self, index)) return tpu_scatter_src(self.reshape({1}), 0, index.reshape({1}), src.reshape({-1})).squeeze(0);
  const int64_t dim = at::maybe_wrap_dim(dim_arg, std::max<int64_t>(self.dim(), 1));
  if (self.scalar_type() == at::kComplexFloat && src.scalar_type() == at::kComplexFloat) {  // each plane alike
    return complex::per_plane(self, [&](const at::Tensor& p, int k) { return tpu_scatter_src(p, dim, index, complex::part(src, k)); });
  }
  const CpuFn cpu = [dim, index](const std::vector<at::Tensor>& c) { return at::scatter(c[0], dim, index.cpu(), c[1]); };
  std::string why = unsupported(self, index, dim);
  const int64_t n = index.numel();
  if (why.empty() && src.scalar_type() != self.scalar_type()) why = "a source of another dtype";
  if (why.empty() && n > (int64_t{1} << 24)) why = "more than 2^24 index elements (their positions are exact in f32 below)";
  const at::Tensor positions = at::arange(n, self.options().dtype(at::kFloat)).view(index.sizes());
  const at::Tensor winner = why.empty() ? scatter_combined(at::empty(self.sizes(), positions.options()), dim, index, positions,
                                                           ExprOp::Max, why)
                                        : at::Tensor();
  if (!why.empty()) return run_on_cpu("scatter", {self, src}, cpu, why);
  const at::Tensor taken = winner.clamp_min(0).to(at::kLong).reshape({-1});
  const at::Tensor picked = leading_block(src, index).reshape({n}).index_select(0, taken).view(self.sizes());
  return at::where(winner.ge(0), picked, self);
}

at::Tensor& tpu_scatter_src_(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src) {
  self.copy_(tpu_scatter_src(self, dim, index, src));
  return self;
}

at::Tensor& tpu_scatter_add_(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src) {
  self.copy_(tpu_scatter_add(self, dim, index, src));
  return self;
}
at::Tensor& tpu_scatter_value_(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Scalar& value) {
  self.copy_(tpu_scatter_value(self, dim, index, value));
  return self;
}

}  // namespace

at::Tensor scatter_combined(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                            ExprOp combine, std::string& why) {
  why = scatter_unsupported(self, index, dim, src);
  if (!why.empty()) return {};
  const at::Tensor rows = leading_block(src, index).reshape({index.numel(), 1});
  const at::Tensor base = other_dims_offsets(self, index, dim).to(self.device());
  const DimIndexing d(self, index, dim);
  const std::vector<int64_t> shape = self.sizes().vec();
  const char* op = combine == ExprOp::Max ? "scatter_amax" : combine == ExprOp::Min ? "scatter_amin" : "scatter_prod";
  return record(op, {rows, index_words(index), base}, self.scalar_type(), [&](Graph& g, const std::vector<int>& v) {
    const int at = flat_index(g, v[1], v[2], d, op);
    return g.reshape(g.scatter_combine(v[0], at, /*index_pairs=*/false, d.numel, combine, op), shape, op);
  }, [=](const std::vector<at::Tensor>&) {
    const double identity = combine == ExprOp::Max ? -INFINITY : combine == ExprOp::Min ? INFINITY : 1.0;
    const char* reduce = combine == ExprOp::Max ? "amax" : combine == ExprOp::Min ? "amin" : "prod";
    return at::full_like(self.cpu(), identity).scatter_reduce(dim, index.cpu(), src.cpu(), reduce, true);
  });
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("gather", tpu_gather);
  m.impl("gather.out", Variants<tpu_gather>::out_apart);
  m.impl("scatter_add", tpu_scatter_add);
  m.impl("scatter_add_", tpu_scatter_add_);
  m.impl("scatter_add.out", Variants<tpu_scatter_add>::out);
  m.impl("scatter.src", tpu_scatter_src);
  m.impl("scatter_.src", tpu_scatter_src_);
  m.impl("scatter.src_out", Variants<tpu_scatter_src>::out);
  m.impl("scatter.value", tpu_scatter_value);
  m.impl("scatter_.value", tpu_scatter_value_);
  m.impl("scatter.value_out", Variants<tpu_scatter_value>::out);
}

}  // namespace vtpu::bridge
