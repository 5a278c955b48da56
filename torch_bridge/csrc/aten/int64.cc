// See ops_int64.h.
#include "torch_bridge/csrc/aten/int64.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "kernels/compose/cumsum.h"
#include "kernels/compose/reduce_dims.h"
#include "torch_bridge/csrc/record/recorder.h"
#include "torch_bridge/csrc/runtime/runtime.h"

namespace vtpu::bridge {
namespace {

using kernels::ExprOp;
using kernels::Graph;

// The bound operands of `e` must stay under for int32 to compute it exactly; 0: not on this path.
int64_t bound_for(ExprOp e) {
  switch (e) {
    case ExprOp::Add: case ExprOp::Sub: return int64_t{1} << 30;
    case ExprOp::Eq: case ExprOp::Ne: case ExprOp::Lt: case ExprOp::Le: case ExprOp::Gt: case ExprOp::Ge:
    case ExprOp::Max: case ExprOp::Min: case ExprOp::Div: case ExprOp::Mul:  // Mul: the product too
      return int64_t{1} << 31;
    default: return 0;
  }
}

bool int64_on_chip(const at::Tensor& t) { return t.device().is_privateuseone() && t.scalar_type() == at::kLong; }


}  // namespace

std::optional<at::Tensor> int64_sign_op(const char* op, ExprOp e, const at::Tensor& self, const CpuFn& cpu) {
  if (!int64_on_chip(self)) return std::nullopt;
  const auto known = int64_bound_of(self);
  const int64_t bound = int64_t{1} << 31;
  if (!known || *known >= bound) return int64_exact_unary(op, e == ExprOp::Neg ? Int64Unary::Neg : Int64Unary::Abs, self, cpu);
  const at::Tensor words = record(op, {index_words(self)}, at::kInt, [&](Graph& g, const std::vector<int>& v) {
    return int64_words(g, g.unary(e, g.reshape(g.int64_narrow(v[0], bound, op), self.sizes().vec()), op));
  }, [cpu, self](const std::vector<at::Tensor>&) { return cpu({self.cpu()}); });
  return as_int64(words, *known);
}

at::Tensor int64_where(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other) {
  const c10::Device device = condition.device();
  const at::Tensor picked = at::where(condition.unsqueeze(-1), int64_word_pairs(self.to(device, at::kLong)),
                                      int64_word_pairs(other.to(device, at::kLong)));
  const auto shape = at::infer_size(at::infer_size(condition.sizes(), self.sizes()), other.sizes());
  at::Tensor out = as_int64(picked.contiguous()).view(shape);
  const auto a = self.scalar_type() == at::kLong ? int64_bound_of(self) : std::optional<int64_t>(int64_t{1} << 31);
  const auto b = other.scalar_type() == at::kLong ? int64_bound_of(other) : std::optional<int64_t>(int64_t{1} << 31);
  if (a && b && !out.is_same(picked)) set_int64_bound(out, std::max(*a, *b));
  return out;
}

namespace {

// int64_binary's cheaper path: both operands narrowed to int32 when their known bounds allow.
std::optional<at::Tensor> narrowed_binary(const char* op, ExprOp e, const at::Tensor& self, const at::Tensor& other, double alpha,
                                          c10::ScalarType result_dtype, const CpuFn& cpu) {
  const int64_t bound = bound_for(e);
  if (bound == 0 || alpha != 1.0) return std::nullopt;
  // Each operand's known magnitude: int64 tensors carry it with their buffer (set by whoever
  // wrote them: host copies, arange, these ops); unknown ones stay off this path.
  std::vector<at::Tensor> inputs;
  int64_t magnitude[2] = {0, 0};
  int64_t exact_below = int64_t{1} << 62;  // against a float: the integers it holds exactly
  int k = 0;
  for (const at::Tensor* t : {&self, &other}) {
    int64_t& m = magnitude[k++];
    if (is_cpu_scalar(*t)) {
      const double v = std::fabs(t->item().toDouble());
      if (!(v < double(bound))) return std::nullopt;
      m = static_cast<int64_t>(v);
    } else if (int64_on_chip(*t)) {
      const auto known = int64_bound_of(*t);
      if (!known || *known >= bound) return std::nullopt;
      m = *known;
    } else if (at::isIntegralType(t->scalar_type(), /*includeBool=*/true)) {
      m = int64_t{1} << 31;  // an int32 operand: only against int64 under comparisons' bound
      if (bound < m) return std::nullopt;
    } else if (is_chip_float(t->scalar_type()) && result_dtype == t->scalar_type()) {
      // int64 against a float of the result's dtype: torch converts the int64 to that dtype
      // first, exactly below 2^24 (f32), 2^11 (f16), 2^8 (bf16); checked below, the CPU past it.
      m = 0;
      exact_below = std::min(exact_below, int64_t{1} << (result_dtype == at::kFloat ? 24 : result_dtype == at::kHalf ? 11 : 8));
    } else {
      return std::nullopt;  // other floats: the CPU keeps torch's int64 -> float rounding
    }
    inputs.push_back(int64_on_chip(*t) ? index_words(*t) : *t);
  }
  if (std::max(magnitude[0], magnitude[1]) >= exact_below) return std::nullopt;
  if (e == ExprOp::Mul && magnitude[0] * magnitude[1] >= bound) return std::nullopt;  // the int32 product could wrap
  const bool long_result = result_dtype == at::kLong;
  const at::Tensor out = record(op, inputs, long_result ? at::kInt : result_dtype, [&](Graph& g, const std::vector<int>& v) {
    // v holds the device operands in order; CPU scalars become scalar operands of the op.
    std::vector<int> operand;
    size_t next = 0;
    for (const at::Tensor* t : {&self, &other}) {
      if (is_cpu_scalar(*t)) {
        operand.push_back(-1);
        continue;
      }
      int x = v[next++];
      if (int64_on_chip(*t)) x = g.reshape(g.int64_narrow(x, bound, op), t->sizes().vec());
      operand.push_back(x);
    }
    int r;
    if (operand[1] < 0) r = g.binary_scalar(e, operand[0], other.item().toDouble());
    else if (operand[0] < 0) r = g.binary_scalar(e, operand[1], self.item().toDouble(), /*scalar_first=*/true);
    else r = g.binary(e, operand[0], operand[1]);
    return long_result ? int64_words(g, r) : r;
  }, [cpu, self, other](const std::vector<at::Tensor>&) { return cpu({self.cpu(), other.cpu()}); });  // as given, not as words
  if (!long_result) return out;
  const at::Tensor result = as_int64(out);
  if (result.is_same(out)) return result;  // computed on the CPU: the host copy set its bound
  const int64_t bound_of_result = e == ExprOp::Add || e == ExprOp::Sub ? magnitude[0] + magnitude[1]
                                  : e == ExprOp::Mul                     ? magnitude[0] * magnitude[1]
                                                                         : std::max(magnitude[0], magnitude[1]);
  set_int64_bound(result, bound_of_result);
  return result;
}

}  // namespace

std::optional<at::Tensor> int64_binary(const char* op, ExprOp e, const at::Tensor& self, const at::Tensor& other, double alpha,
                                       c10::ScalarType result_dtype, const CpuFn& cpu) {
  if (!int64_on_chip(self) && !int64_on_chip(other)) return std::nullopt;
  if (auto narrowed = narrowed_binary(op, e, self, other, alpha, result_dtype, cpu)) return narrowed;
  return int64_exact_binary(op, e, self, other, alpha, result_dtype, cpu);
}

namespace {

// The largest |element| of an integer tensor whose sums the chip may take in f32: bool, int8,
// uint8, or int64 of known magnitude (nullopt for others).
std::optional<int64_t> summable_magnitude(const at::Tensor& self) {
  if (self.scalar_type() == at::kBool) return 1;
  if (self.scalar_type() == at::kChar) return 128;
  if (self.scalar_type() == at::kByte) return 255;
  if (int64_on_chip(self)) return int64_bound_of(self);
  return std::nullopt;
}

// The int64 result of `reduce` (sums in f32 over `extent` elements each) on an integer tensor,
// when f32 holds every partial sum exactly (< 2^24); nullopt otherwise.
std::optional<at::Tensor> int64_accumulate(const char* op, const at::Tensor& self, int64_t extent,
                                           const std::function<int(Graph&, int)>& reduce, const CpuFn& cpu) {
  const auto magnitude = summable_magnitude(self);
  if (!magnitude || (*magnitude > 0 && extent >= (int64_t{1} << 24) / *magnitude)) return std::nullopt;
  const bool words = int64_on_chip(self);
  const at::Tensor input = words ? index_words(self) : self;
  const at::Tensor source = self;
  const at::Tensor out = record(op, {input}, at::kInt, [&](Graph& g, const std::vector<int>& v) {
    const int x = words ? g.reshape(g.int64_narrow(v[0], *magnitude + 1, op), source.sizes().vec()) : v[0];
    return int64_words(g, g.cast(reduce(g, g.cast(x, kernels::DType::F32)), kernels::DType::I32));
  }, [cpu, source](const std::vector<at::Tensor>&) { return cpu({source.cpu()}); });
  return as_int64(out, *magnitude * extent);
}

}  // namespace

std::optional<at::Tensor> int64_sum(const at::Tensor& self, const std::vector<int64_t>& dims, const CpuFn& cpu) {
  int64_t extent = 1;
  for (int64_t d : dims) extent *= self.size(d);
  const auto reduce = [&](Graph& g, int x) { return kernels::reduce_dims(g, x, dims, kernels::RowOp::Sum); };
  if (auto counted = int64_accumulate("sum", self, extent, reduce, cpu)) return counted;
  if (extent > kernels::kMaxExactByteSum || !(self.scalar_type() == at::kInt || int64_on_chip(self))) return std::nullopt;
  // any int32 or int64 values: eight byte planes summed exactly, recombined modulo 2^64 as torch's
  const at::Tensor out = record("sum", {integer_words_input(self)}, at::kInt, [&](Graph& g, const std::vector<int>& v) {
    const kernels::Int64Words x = integer_words(g, self, v[0], "sum");
    return kernels::join_words(g, kernels::sum_int64_bytes(g, x, [&](int plane) { return reduce(g, plane); }, "sum"), "sum");
  }, [cpu, self](const std::vector<at::Tensor>&) { return cpu({self.cpu()}); });
  return as_int64(out);
}

bool int64_copy_on_chip(const at::Tensor& dst, const at::Tensor& src) {
  if (dst.device() != src.device() || !dst.sizes().equals(src.sizes()) || dst.numel() == 0 || !is_whole_buffer(dst)) return false;
  const auto from = src.scalar_type(), to = dst.scalar_type();
  const int64_t n = dst.numel();
  auto& rt = Runtime::get();
  if (to == at::kLong && from == at::kLong) {
    // the same bytes, copied on the chip as int32 words (a view's strided ones too); the values' bound too
    record_copy(word_view(dst), word_view(src));
    set_int64_bound(dst, int64_bound_of(src));
    return true;
  }
  if (to == at::kLong && (from == at::kBool || from == at::kChar || from == at::kInt)) {
    {
      std::lock_guard lock(rt.mutex());
      Recorder& rec = Recorder::of(dst.device().index());
      const int v = rec.values_of({src})[0];
      Graph& g = rec.graph();
      const int words = int64_words(g, g.node(v).type.dtype == kernels::DType::I32 ? v : g.cast(v, kernels::DType::I32, "copy_"));
      rec.define_output(dst.reshape({n}).view(at::kInt), g.reshape(words, {2 * n}, "copy_"), "copy_");
      rec.op_recorded();
    }
    set_int64_bound(dst, from == at::kBool ? 1 : from == at::kChar ? 128 : int64_t{1} << 31);
    return true;
  }
  if (from != at::kLong) return false;
  const int64_t bound = int64_bound_of(src).value_or(std::numeric_limits<int64_t>::max());
  const bool exact = to == at::kFloat || to == at::kBFloat16 || to == at::kInt || to == at::kBool || (to == at::kChar && bound < 128);
  if (bound >= (int64_t{1} << 31) || !exact) return false;
  const at::Tensor words = index_words(src);
  std::lock_guard lock(rt.mutex());
  Recorder& rec = Recorder::of(dst.device().index());
  const int v = rec.values_of({words})[0];
  Graph& g = rec.graph();
  const int narrow = g.reshape(g.int64_narrow(v, bound + 1, "copy_"), dst.sizes().vec(), "copy_");
  const auto dtype = to_kernel_dtype(to);
  rec.define_output(dst, dtype == kernels::DType::I32 ? narrow : g.cast(narrow, dtype, "copy_"), "copy_");
  rec.op_recorded();
  return true;
}

namespace {

// The int64 cumsum of any int64, int32, int8 or bool values, exact at any magnitude
// (kernels/compose/cumsum.h: eight byte planes); its result's range is not known.
at::Tensor int64_cumsum(const at::Tensor& self, int64_t dim, const CpuFn& cpu) {
  const at::Tensor out = record("cumsum", {integer_words_input(self)}, at::kInt, [&](Graph& g, const std::vector<int>& v) {
    return kernels::cumsum_int64(g, self.scalar_type() == at::kLong ? v[0] : int64_words(g, v[0]), dim);  // pairs as they are
  }, [cpu, self](const std::vector<at::Tensor>&) { return cpu({self.cpu()}); });
  return as_int64(out);
}

}  // namespace

std::optional<at::Tensor> integer_cumsum(const at::Tensor& self, int64_t dim, c10::ScalarType result, const CpuFn& cpu) {
  const auto t = self.scalar_type();
  const int64_t n = self.size(dim);
  // the largest |element|, inclusive: int32 words of any value scan exactly too
  const std::optional<int64_t> magnitude = t == at::kInt ? std::optional<int64_t>(int64_t{1} << 31) : summable_magnitude(self);
  if (result == at::kLong && magnitude) {
    // small values (masks, counts) whose partial sums stay below 2^24: one f32 scan, exact, at any
    // length; its passes cover the values' bits (a bf16 part holds 8)
    const int passes = *magnitude <= 256 ? 1 : *magnitude <= 65536 ? 3 : 6;
    const auto scan = [&](Graph& g, int x) { return kernels::cumsum(g, x, dim, passes); };
    if (auto scanned = int64_accumulate("cumsum", self, n, scan, cpu)) return scanned;
  }
  if (n > kernels::kMaxExactByteSum || (result != at::kInt && result != at::kLong)) return std::nullopt;
  // int64 of unknown or large magnitude: into int64, exactly at any magnitude; into int32, the CPU
  if (t == at::kLong && (!magnitude || *magnitude >= (int64_t{1} << 31))) {
    return result == at::kLong ? std::optional(int64_cumsum(self, dim, cpu)) : std::nullopt;
  }
  if (!magnitude) return std::nullopt;
  // int64 results need every partial sum to fit int32; int32 results wrap as torch's do
  const int64_t sum_bound = *magnitude * n;
  if (result == at::kLong && sum_bound >= (int64_t{1} << 31)) return int64_cumsum(self, dim, cpu);
  const bool words = int64_on_chip(self);
  const at::Tensor input = words ? index_words(self) : self;
  const auto shape = self.sizes().vec();
  const at::Tensor out = record("cumsum", {input}, at::kInt, [&](Graph& g, const std::vector<int>& v) {
    int x = words ? g.reshape(g.int64_narrow(v[0], *magnitude + 1, "cumsum"), shape, "cumsum") : v[0];
    if (g.node(x).type.dtype != kernels::DType::I32) x = g.cast(x, kernels::DType::I32, "cumsum");
    const int sums = kernels::cumsum_int32(g, x, dim);
    return result == at::kLong ? int64_words(g, sums) : sums;
  }, [cpu, self](const std::vector<at::Tensor>&) { return cpu({self.cpu()}); });
  return result == at::kLong ? as_int64(out, sum_bound) : out;
}

}  // namespace vtpu::bridge
