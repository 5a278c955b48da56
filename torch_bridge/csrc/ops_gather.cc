// torch.gather on the chip: out[..., j, ...] = self[..., index[..., j, ...], ...] along `dim`.
// Flattened, out's element p is self's element base[p] + index[p] * stride(dim), where base (the
// other dims' offsets) depends only on the shapes and is made on the host; the gather kernel
// (kernels/gather.h) then reads that flat index on the chip and moves one element per row (an
// int64 self: its two int32 words). The index's int64 words are narrowed on the chip (an index
// beyond int32 traps there) and an index outside [0, size(dim)) is sent past the table, where the
// gather traps: an index torch would reject raises IndexError at the next synchronisation instead
// of reading a neighbouring row (BERT-style models gather their token type ids this way).
#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>
#include <torch/library.h>

#include <limits>

#include "torch_bridge/csrc/ops_support.h"
#include "torch_bridge/csrc/recorder.h"

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

at::Tensor tpu_gather(const at::Tensor& self, int64_t dim_arg, const at::Tensor& index, bool sparse_grad) {
  TORCH_CHECK_INDEX(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt,
                    "gather(): Expected dtype int32/int64 for index");
  const int64_t dim = at::maybe_wrap_dim(dim_arg, std::max<int64_t>(self.dim(), 1));
  const CpuFn cpu = [dim, index, sparse_grad](const std::vector<at::Tensor>& c) {
    return at::gather(c[0], dim, index.cpu(), sparse_grad);
  };
  if (const std::string why = unsupported(self, index, dim); !why.empty()) return run_on_cpu("gather", {self}, cpu, why);
  const bool i64 = self.scalar_type() == at::kLong;
  const int64_t numel = self.numel(), size = self.size(dim);
  const int64_t stride = self.contiguous().stride(dim);
  // One element per table row: int64 as its [low, high] int32 words.
  const at::Tensor table = i64 ? self.contiguous().view(at::kInt).view({numel, 2}) : self.reshape({numel, 1});
  const at::Tensor base = other_dims_offsets(self, index, dim).to(self.device());
  const at::Tensor picked = record("gather", {table, index_words(index), base}, table.scalar_type(),
                                   [&](Graph& g, const std::vector<int>& v) {
    const int along = index.scalar_type() == at::kLong ? g.int64_narrow(v[1], int64_t{1} << 31, "gather") : v[1];
    const int flat = g.binary(ExprOp::Add, g.binary_scalar(ExprOp::Mul, along, double(stride), false, "gather"), v[2], "gather");
    const int outside = g.binary(ExprOp::Or, g.binary_scalar(ExprOp::Lt, along, 0, false, "gather"),
                                 g.binary_scalar(ExprOp::Ge, along, double(size), false, "gather"), "gather");
    const int beyond = g.full({{1}, DType::I32}, double(numel), "gather");  // no such row: the gather traps
    const int checked = g.where(outside, beyond, flat, "gather");
    return g.gather(v[0], checked, /*index_pairs=*/false, "gather");
  }, [cpu, self, i64](const std::vector<at::Tensor>&) {  // the kernel's own result: [n, 1], or [n, 2] words
    const at::Tensor out = cpu({self.cpu()}).reshape({-1, 1});
    return i64 ? out.view(at::kInt) : out;
  });
  if (!i64) return picked.view(index.sizes());
  at::Tensor out = as_int64(picked).view(index.sizes());
  set_int64_bound(out, int64_bound_of(self));
  return out;
}

at::Tensor& tpu_gather_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, bool sparse_grad, at::Tensor& out) {
  return write_out(out, tpu_gather(self, dim, index, sparse_grad));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("gather", tpu_gather);
  m.impl("gather.out", tpu_gather_out);
}

}  // namespace vtpu::bridge
