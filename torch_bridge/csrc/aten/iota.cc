// Ops built on the chip's iota (kernels/generators/iota.h): arange, tril/triu masks (and eye), argmax/argmin. int64
// results (arange's default dtype, argmax's indices) are made as int32 (low, high) word pairs
// (int64_words) and land in the int64 tensor's bytes; values outside int32 stay on the CPU.
#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>
#include <torch/library.h>

#include <cmath>
#include <limits>

#include "kernels/compose/reduce_dims.h"
#include "kernels/generators/row_spec.h"
#include "torch_bridge/csrc/aten/complex.h"
#include "torch_bridge/csrc/aten/int64.h"
#include "torch_bridge/csrc/aten/order_statistics.h"
#include "torch_bridge/csrc/record/op_support.h"
#include "torch_bridge/csrc/record/recorder.h"
#include "torch_bridge/csrc/runtime/runtime.h"

namespace vtpu::bridge {
namespace {

using kernels::DType;
using kernels::ExprOp;
using kernels::Graph;

bool fits_int32(double v) { return v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max(); }

at::Tensor& tpu_arange_out(const at::Scalar& start, const at::Scalar& end, const at::Scalar& step, at::Tensor& out) {
  // torch's own size computation and argument checks, on the meta device
  const int64_t n = at::arange(start, end, step, at::TensorOptions().dtype(out.scalar_type()).device(at::kMeta)).numel();
  out.resize_({n});
  if (n == 0) return out;
  const double first = start.toDouble(), by = step.toDouble(), last = first + by * double(n - 1);
  const auto type = out.scalar_type();
  const bool integral = at::isIntegralType(type, /*includeBool=*/false);
  std::string why;
  if (!is_chip_float(type) && type != at::kInt && type != at::kLong) why = c10::str(type, " tensors");
  else if (integral && (!fits_int32(first) || !fits_int32(last))) why = "values beyond int32";
  else if (!integral && n > (int64_t{1} << 24)) why = "more than 2^24 floating-point values";
  if (!why.empty()) {
    TORCH_CHECK_NOT_IMPLEMENTED(Runtime::get().cpu_fallback_allowed(), "vtpu: aten::arange.start_out cannot run on the chip: ", why,
                                ". Set VTPU_CPU_FALLBACK=1 (or vtpu.set_cpu_fallback(True)) to run it on the CPU.");
    return out.copy_(at::arange(start, end, step, at::TensorOptions().dtype(type)));
  }
  at::Tensor target = is_whole_buffer(out) ? out : at::empty({n}, out.options());
  {
    auto& rt = Runtime::get();
    std::lock_guard lock(rt.mutex());
    // element i = start + i * step: f32 indices (exact below 2^24) for floats, i32 for integers
    const auto values = [&](Graph& g) {
      const int i = g.iota({{n}, integral ? DType::I32 : DType::F32}, "arange");
      return g.binary_scalar(ExprOp::Add, g.binary_scalar(ExprOp::Mul, i, by), first);
    };
    if (type == at::kLong) {
      define_on_chip(target.view(at::kInt), "arange", [&](Graph& g) { return g.reshape(int64_words(g, values(g)), {2 * n}); });
    } else {
      define_on_chip(target, "arange", [&](Graph& g) { return g.cast(values(g), to_kernel_dtype(type)); });
    }
  }
  if (type == at::kLong) set_int64_bound(target, static_cast<int64_t>(std::max(std::fabs(first), std::fabs(last))));
  if (!target.is_same(out)) out.copy_(target);
  return out;
}

// tril / triu: where(column - row <= diagonal (tril) or >= diagonal (triu), self, 0), the mask
// made from two iotas ([rows, 1] against [cols]).
at::Tensor triangle(const char* op, const at::Tensor& self, int64_t diagonal, bool lower) {
  const CpuFn cpu = [diagonal, lower](const std::vector<at::Tensor>& c) { return lower ? at::tril(c[0], diagonal) : at::triu(c[0], diagonal); };
  TORCH_CHECK(self.dim() >= 2, op, ": input tensor must have at least 2 dimensions");
  const int64_t rows = self.size(-2), cols = self.size(-1);
  if (self.scalar_type() == at::kLong) {  // int64's word pairs: the mask's triangle, then where on the words
    const at::Tensor keep = triangle(op, at::ones({rows, cols}, self.options().dtype(at::kBool)), diagonal, lower);
    return at::where(keep, self, at::zeros({}, self.options()));
  }
  return record(op, {self}, self.scalar_type(), [&](Graph& g, const std::vector<int>& v) {
    const int row = g.iota({{rows, 1}, DType::I32}, op), col = g.iota({{cols}, DType::I32}, op);
    const int offset = g.binary(ExprOp::Sub, col, row);  // [rows, cols]
    const int keep = g.binary_scalar(lower ? ExprOp::Le : ExprOp::Ge, offset, static_cast<double>(diagonal));
    return g.where(keep, v[0], g.full({{1}, g.node(v[0]).type.dtype}, 0, op), op);
  }, cpu);
}
// complex64: each plane's triangle (a real-linear op)
at::Tensor tpu_tril(const at::Tensor& self, int64_t diagonal) {
  if (self.scalar_type() == at::kComplexFloat) return complex::linear(self, [&](const at::Tensor& p) { return tpu_tril(p, diagonal); });
  return triangle("tril", self, diagonal, true);
}
at::Tensor tpu_triu(const at::Tensor& self, int64_t diagonal) {
  if (self.scalar_type() == at::kComplexFloat) return complex::linear(self, [&](const at::Tensor& p) { return tpu_triu(p, diagonal); });
  return triangle("triu", self, diagonal, false);
}

// eye: ones kept on the main diagonal by triu then tril (torch's kernel writes the diagonal of a
// zeroed buffer through a strided view, which the chip has no reason to imitate).
at::Tensor& tpu_eye_m_out(int64_t n, int64_t m, at::Tensor& out) {
  TORCH_CHECK(n >= 0, "n must be greater or equal to 0, got ", n);
  TORCH_CHECK(m >= 0, "m must be greater or equal to 0, got ", m);
  out.resize_({n, m});
  // in f32 (triu has no int64 kernel), converted by the copy into any dtype
  if (out.numel() > 0) out.copy_(tpu_tril(tpu_triu(at::ones({n, m}, out.options().dtype(at::kFloat)), 0), 0));
  return out;
}

at::Tensor& tpu_eye_out(int64_t n, at::Tensor& out) { return tpu_eye_m_out(n, n, out); }

// A reduction along the last dim: one row kernel, or, for rows longer than it holds, pieces
// (kernels/compose/reduce_dims.h).
int reduce_last_dim(Graph& g, kernels::RowOp op, int value, std::string label) {
  const int64_t rank = static_cast<int64_t>(g.node(value).type.shape.size());
  if (g.node(value).type.shape.back() <= kernels::kMaxRowCols) return g.row(op, value, -1, -1, 1e-5, std::move(label));
  return kernels::reduce_dims(g, value, {rank - 1}, op);
}

// argmax / argmin over one dim (moved last) or over everything: the first position holding the
// row's maximum (minimum), a NaN counting as the maximum and the minimum as torch has it.
at::Tensor arg_extreme(const char* op, const at::Tensor& self, std::optional<int64_t> dim, bool keepdim, bool max) {
  const CpuFn cpu = [dim, keepdim, max](const std::vector<at::Tensor>& c) {
    return max ? at::argmax(c[0], dim, keepdim) : at::argmin(c[0], dim, keepdim);
  };
  if (self.dim() == 0 && self.numel() == 1 && !self.is_complex()) {  // one element: a 0-d 0, as a 1-element row
    if (dim) (void)at::maybe_wrap_dim(*dim, int64_t{0});  // torch's IndexError for a dim a 0-d tensor lacks
    return arg_extreme(op, self.reshape({1}), 0, false, max).reshape({});
  }
  if (self.numel() == 0 || !(at::isFloatingType(self.scalar_type()) || at::isIntegralType(self.scalar_type(), true))) {
    return run_on_cpu(op, {self}, cpu, "empty or complex inputs");
  }
  const int64_t d = dim ? at::maybe_wrap_dim(*dim, self.dim()) : -1;
  if (at::isIntegralType(self.scalar_type(), true)) {  // exact at any magnitude (int64.h)
    std::vector<int64_t> dims;
    for (int64_t k = 0; k < self.dim(); ++k) {
      if (!dim || k == d) dims.push_back(k);
    }
    const at::Tensor indices = integer_extreme(op, self, dims, max, /*position=*/true, cpu);
    if (!dim) return keepdim ? indices.reshape(std::vector<int64_t>(self.dim(), 1)) : indices.reshape({});
    return keepdim ? indices.unsqueeze(d) : indices;
  }
  const at::Tensor rows = dim ? self.movedim(d, -1) : self.reshape({1, self.numel()});
  const int64_t width = rows.size(-1);
  if (width > (int64_t{1} << 24)) return run_on_cpu(op, {self}, cpu, "more than 2^24 elements per reduction");
  std::vector<int64_t> out_shape(rows.sizes().begin(), rows.sizes().end() - 1);
  at::Tensor pairs = record(op, {rows}, at::kInt, [&](Graph& g, const std::vector<int>& v) {
    const int x = v[0];
    auto column = g.node(x).type.shape;
    column.back() = 1;
    const int extreme = g.reshape(reduce_last_dim(g, max ? kernels::RowOp::Max : kernels::RowOp::Min, x, ""), column);
    const int hit = g.binary(ExprOp::Or, g.binary(ExprOp::Eq, x, extreme), g.binary(ExprOp::Ne, x, x));
    const int position = g.where(hit, g.iota({{width}, DType::F32}, op), g.full({{1}, DType::F32}, double(width), op));
    return int64_words(g, g.cast(reduce_last_dim(g, kernels::RowOp::Min, position, op), DType::I32));
  }, [cpu, out_shape](const std::vector<at::Tensor>& c) { return cpu(c).reshape(out_shape); });
  const at::Tensor indices = as_int64(pairs, width - 1);
  if (!dim) return keepdim ? indices.reshape(std::vector<int64_t>(self.dim(), 1)) : indices.reshape({});
  return keepdim ? indices.unsqueeze(d) : indices;
}
at::Tensor tpu_argmax(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  TORCH_CHECK(self.scalar_type() != at::kBool, "argmax(): does not support bool input");  // the CPU kernel's check
  return arg_extreme("argmax", self, dim, keepdim, true);
}
at::Tensor tpu_argmin(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  TORCH_CHECK(self.scalar_type() != at::kBool, "argmin(): does not support bool input");
  return arg_extreme("argmin", self, dim, keepdim, false);
}

// max / min over a dim: the values (amax/amin) and the first position holding them. Inputs
// argmax cannot take run on the CPU once, for both results.
std::tuple<at::Tensor, at::Tensor> extreme_dim(const char* op, const at::Tensor& self, int64_t dim, bool keepdim, bool max) {
  if (self.dim() == 0 && !self.is_complex()) {  // one element: itself and 0, 0-d
    (void)at::maybe_wrap_dim(dim, int64_t{0});
    auto [values, indices] = extreme_dim(op, self.reshape({1}), 0, false, max);
    return {values.reshape({}), indices.reshape({})};
  }
  if (self.numel() == 0 || !(at::isFloatingType(self.scalar_type()) || at::isIntegralType(self.scalar_type(), true))) {
    const auto r = run_on_cpu_outputs(op, {self}, [dim, keepdim, max](const std::vector<at::Tensor>& c) {
      auto [values, indices] = max ? at::max(c[0], dim, keepdim) : at::min(c[0], dim, keepdim);
      return std::vector<at::Tensor>{values, indices};
    }, "empty or complex inputs");
    return {r[0], r[1]};
  }
  return {max ? at::amax(self, {dim}, keepdim) : at::amin(self, {dim}, keepdim), arg_extreme(op, self, dim, keepdim, max)};
}
std::tuple<at::Tensor, at::Tensor> tpu_max_dim(const at::Tensor& self, int64_t dim, bool keepdim) {
  return extreme_dim("max", self, dim, keepdim, true);
}
std::tuple<at::Tensor, at::Tensor> tpu_min_dim(const at::Tensor& self, int64_t dim, bool keepdim) {
  return extreme_dim("min", self, dim, keepdim, false);
}
// topk by k rounds of "the first position holding the largest value not yet taken" (argmax's
// rule: a NaN counts as the largest), each round a row max and a row min over positions (long
// rows in pieces); the values and positions are gathered into one f32 [.., 2k] result (positions
// exact below 2^24), then split. Ties: the first position first. smallest-k takes the smallest
// value, NaN counting as larger than +inf, as torch does: NaN is read as +inf and its position
// ranked after every other position (width is added to it), so a row's +inf are taken before its
// NaN. A round costs two passes over the rows, a bitonic sort (order_statistics.cc) far more:
// top-50 of 64 x 1000 took 141 us simulated by rounds and 11,334 us by sort
// (bench/topk_rounds.py); only rows of a few hundred make the two even, at about 60 rounds. So
// rounds serve k up to 64, and larger k sorts. Integer and empty inputs fall back.
constexpr int64_t kMostRounds = 64;
std::tuple<at::Tensor, at::Tensor> tpu_topk(const at::Tensor& self, c10::SymInt k_sym, int64_t dim, bool largest, bool sorted) {
  const int64_t k = k_sym.expect_int();
  const auto cpu_both = [k, dim, largest, sorted](const at::Tensor& x) { return at::topk(x, k, dim, largest, sorted); };
  const int64_t d = self.dim() > 0 ? at::maybe_wrap_dim(dim, self.dim()) : 0;
  const int64_t width = self.dim() > 0 ? self.size(d) : 1;
  std::string why;
  if (!is_chip_float(self.scalar_type())) why = "non-f32/bf16/f16 inputs";
  else if (self.dim() == 0 || self.numel() == 0) why = "0-dim or empty inputs";
  else if (k < 1) why = "k below 1";
  else if (k > width) why = "k larger than the dim";
  else if (k > kMostRounds) return topk_by_sort(self, k, d, largest);  // order_statistics.cc: the first k of a stable sort
  else if (width > (int64_t{1} << (largest ? 24 : 23))) why = largest ? "more than 2^24 elements per row" : "more than 2^23 elements per row (smallest-k)";
  if (!why.empty()) {
    const auto r = run_on_cpu_outputs("topk", {self}, [cpu_both](const std::vector<at::Tensor>& c) {
      auto [values, indices] = cpu_both(c[0]);
      return std::vector<at::Tensor>{values, indices};
    }, why);
    return {r[0], r[1]};
  }
  const at::Tensor rows = self.movedim(d, -1);
  const CpuFn cpu_packed = [k, largest](const std::vector<at::Tensor>& c) {
    auto [values, indices] = at::topk(c[0].to(at::kFloat), k, -1, largest, true);
    return at::cat({values, indices.to(at::kFloat)}, -1);
  };
  const at::Tensor packed = record("topk", {rows}, at::kFloat, [&](Graph& g, const std::vector<int>& v) {
    const int x = g.node(v[0]).type.dtype == DType::F32 ? v[0] : g.cast(v[0], DType::F32, "topk");
    auto column = g.node(x).type.shape;
    column.back() = 1;
    const auto constant = [&](double value) { return g.full({{1}, DType::F32}, value, "topk"); };
    const double inf = std::numeric_limits<double>::infinity();
    const int iota = g.iota({{width}, DType::F32}, "topk");
    // largest: x, its max; smallest: x with NaN read as +inf, its min, NaN ranked last by position
    const int is_nan = largest ? -1 : g.binary(ExprOp::Ne, x, x);
    const int key = largest ? x : g.where(is_nan, constant(inf), x, "topk");
    const int rank = largest ? iota : g.where(is_nan, g.binary(ExprOp::Add, iota, constant(double(width))), iota, "topk");
    const int excluded = constant(largest ? -inf : inf), none = constant(double(largest ? width : 2 * width));
    const auto row_op = largest ? kernels::RowOp::Max : kernels::RowOp::Min;
    std::vector<int> values, positions;
    int taken = -1;  // bool [.., width]: positions already picked
    for (int64_t round = 0; round < k; ++round) {
      const int open = taken < 0 ? key : g.where(taken, excluded, key, "topk");
      const int best = g.reshape(reduce_last_dim(g, row_op, open, "topk"), column);
      int hit = g.binary(ExprOp::Eq, open, best);
      if (largest) hit = g.binary(ExprOp::Or, hit, g.binary(ExprOp::Ne, open, open));  // max gives NaN: take one
      if (taken >= 0) hit = g.binary(ExprOp::And, hit, g.unary(ExprOp::Not, taken));
      int position = g.reshape(reduce_last_dim(g, kernels::RowOp::Min, g.where(hit, rank, none), "topk"), column);
      int value = best;
      if (!largest) {  // a rank past the width is a NaN's
        const int past = g.binary(ExprOp::Ge, position, constant(double(width)));
        value = g.where(past, constant(std::numeric_limits<double>::quiet_NaN()), best, "topk");
        position = g.where(past, g.binary(ExprOp::Sub, position, constant(double(width))), position, "topk");
      }
      const int picked = g.binary(ExprOp::Eq, iota, position);
      taken = taken < 0 ? picked : g.binary(ExprOp::Or, taken, picked);
      values.push_back(value);
      positions.push_back(position);
    }
    values.insert(values.end(), positions.begin(), positions.end());
    return g.concat(values, static_cast<int64_t>(column.size()) - 1, "topk");
  }, cpu_packed);
  const at::Tensor values = packed.narrow(-1, 0, k).to(self.scalar_type()).movedim(-1, d).contiguous();
  const at::Tensor indices = int64_from_f32("topk", packed.narrow(-1, k, k), width - 1);
  return {values, indices.movedim(-1, d).contiguous()};
}

// max / min of everything.
at::Tensor tpu_max(const at::Tensor& self) { return at::amax(self, at::IntArrayRef{}, false); }
at::Tensor tpu_min(const at::Tensor& self) { return at::amin(self, at::IntArrayRef{}, false); }

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("arange.start_out", tpu_arange_out);
  m.impl("tril", tpu_tril);
  m.impl("eye.out", tpu_eye_out);
  m.impl("eye.m_out", tpu_eye_m_out);
  m.impl("triu", tpu_triu);
  m.impl("argmax", tpu_argmax);
  m.impl("argmin", tpu_argmin);
  m.impl("max.dim", tpu_max_dim);
  m.impl("min.dim", tpu_min_dim);
  m.impl("max", tpu_max);
  m.impl("topk", tpu_topk);
  m.impl("min", tpu_min);
}

}  // namespace vtpu::bridge
