// int64 elementwise ops at any magnitude: the operands' word pairs go to the chip as they are and
// kernels/compose/int64_words.h computes the 64-bit result from int32 ops, so nothing needs to know
// how large the values are (int64.cc's narrowed path is cheaper and runs first when it can).
#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/compose/int64_words.h"
#include "torch_bridge/csrc/aten/int64.h"

namespace vtpu::bridge {
namespace {

using kernels::ExprOp;
using kernels::Graph;
using kernels::Int64Words;

bool is_device_integer(const at::Tensor& t) {
  return t.device().is_privateuseone() && at::isIntegralType(t.scalar_type(), /*includeBool=*/true);
}

// One operand in the recorded graph: a host scalar becomes a constant, a tensor its words.
Int64Words operand_words(Graph& g, const at::Tensor& t, std::optional<int64_t> host_value, int value, const char* op) {
  return host_value ? kernels::int64_constant(g, *host_value, op) : integer_words(g, t, value, op);
}

int compare(Graph& g, ExprOp e, Int64Words a, Int64Words b, const char* op) {
  switch (e) {
    case ExprOp::Lt: return kernels::less_int64(g, a, b, op);
    case ExprOp::Gt: return kernels::less_int64(g, b, a, op);
    case ExprOp::Le: return g.unary(ExprOp::Not, kernels::less_int64(g, b, a, op), op);
    case ExprOp::Ge: return g.unary(ExprOp::Not, kernels::less_int64(g, a, b, op), op);
    case ExprOp::Eq: return kernels::equal_int64(g, a, b, op);
    default: return g.unary(ExprOp::Not, kernels::equal_int64(g, a, b, op), op);  // Ne
  }
}

Int64Words combine(Graph& g, ExprOp e, Int64Words a, Int64Words b, const char* op) {
  switch (e) {
    case ExprOp::Add: return kernels::add_int64(g, a, b, op);
    case ExprOp::Sub: return kernels::sub_int64(g, a, b, op);
    case ExprOp::Mul: return kernels::mul_int64(g, a, b, op);
    case ExprOp::Max: return kernels::select_int64(g, kernels::less_int64(g, a, b, op), b, a, op);
    case ExprOp::Min: return kernels::select_int64(g, kernels::less_int64(g, a, b, op), a, b, op);
    default: return kernels::bitwise_int64(g, e, a, b, op);
  }
}

// The smallest int64 x whose f32 rounding is >= f (> f when `strictly`): where comparisons of int64
// against f32 (which torch rounds the int64 to first) switch. nullopt when no int64 gets there.
std::optional<int64_t> first_rounding_past(float f, bool strictly) {
  const auto past = [&](int64_t x) { return strictly ? static_cast<float>(x) > f : static_cast<float>(x) >= f; };
  int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  if (!past(hi)) return std::nullopt;
  if (past(lo)) return lo;
  while (static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo) > 1) {  // past(lo) false, past(hi) true
    const int64_t mid = lo + static_cast<int64_t>((static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo)) / 2);
    (past(mid) ? hi : lo) = mid;
  }
  return hi;
}

// x (e) s for int64 x and a float host scalar s, as torch computes it: f32(x) (e) f32(s). Rounding
// is monotonic, so each comparison is one against an integer threshold, exact on the words.
at::Tensor compare_with_float(const char* op, ExprOp e, const at::Tensor& x, double scalar, bool scalar_first, const CpuFn& cpu,
                              const at::Tensor& self, const at::Tensor& other) {
  if (scalar_first) {  // s < x  ==  x > s, and so on
    e = e == ExprOp::Lt ? ExprOp::Gt : e == ExprOp::Gt ? ExprOp::Lt : e == ExprOp::Le ? ExprOp::Ge : e == ExprOp::Ge ? ExprOp::Le : e;
  }
  const auto f = static_cast<float>(scalar);
  const auto below = first_rounding_past(f, false);  // f32(x) < f  ==  x < below
  const auto at_most = first_rounding_past(f, true);  // f32(x) <= f  ==  x < at_most
  return record(op, {int64_word_pairs(x)}, at::kBool, [&](Graph& g, const std::vector<int>& v) {
    const Int64Words w = kernels::split_words(g, v[0], op);
    const auto less_than = [&](std::optional<int64_t> c) {  // x < c; no c: every x is
      if (!c) return g.binary(ExprOp::Eq, w.lo, w.lo, op);
      return kernels::less_int64(g, w, kernels::int64_constant(g, *c, op), op);
    };
    const auto negate = [&](int m) { return g.unary(ExprOp::Not, m, op); };
    if (std::isnan(f)) {  // every comparison false but !=
      const int none = negate(less_than(std::nullopt));
      return e == ExprOp::Ne ? negate(none) : none;
    }
    switch (e) {
      case ExprOp::Lt: return less_than(below);
      case ExprOp::Le: return less_than(at_most);
      case ExprOp::Gt: return negate(less_than(at_most));
      case ExprOp::Ge: return negate(less_than(below));
      case ExprOp::Eq: return g.binary(ExprOp::And, negate(less_than(below)), less_than(at_most), op);
      default: return g.binary(ExprOp::Or, less_than(below), negate(less_than(at_most)), op);  // Ne
    }
  }, [cpu, self, other](const std::vector<at::Tensor>&) { return cpu({self.cpu(), other.cpu()}); }).view(x.sizes());
}

}  // namespace

at::Tensor integer_words_input(const at::Tensor& t) { return t.scalar_type() == at::kLong ? int64_word_pairs(t) : t; }

Int64Words integer_words(Graph& g, const at::Tensor& t, int value, const char* op) {
  return t.scalar_type() == at::kLong ? kernels::split_words(g, value, op) : kernels::widen_to_int64(g, value, op);
}

std::optional<at::Tensor> int64_exact_binary(const char* op, ExprOp e, const at::Tensor& self, const at::Tensor& other,
                                             double alpha, c10::ScalarType result_dtype, const CpuFn& cpu) {
  const bool comparison = kernels::is_comparison(e);
  const bool words_op = e == ExprOp::Add || e == ExprOp::Sub || e == ExprOp::Mul || e == ExprOp::Max || e == ExprOp::Min ||
                        e == ExprOp::BitAnd || e == ExprOp::BitOr || e == ExprOp::BitXor;
  if (!(comparison ? result_dtype == at::kBool : words_op && result_dtype == at::kLong)) return std::nullopt;
  for (const bool first : {false, true}) {  // int64 against a float Python number (masks against inf, thresholds)
    const at::Tensor& x = first ? other : self;
    const at::Tensor& s = first ? self : other;
    if (comparison && is_cpu_scalar(s) && at::isFloatingType(s.scalar_type()) && x.scalar_type() == at::kLong &&
        x.device().is_privateuseone() && at::result_type(self, other) == at::kFloat) {
      return compare_with_float(op, e, x, s.item().toDouble(), first, cpu, self, other);
    }
  }
  // Operands: integer tpu tensors, or integer host scalars (alpha folds into a scalar `other`,
  // and multiplies a tensor `other` exactly).
  std::optional<int64_t> host[2];
  std::vector<at::Tensor> inputs;
  int k = 0;
  for (const at::Tensor* t : {&self, &other}) {
    const bool second = k++ == 1;
    if (is_cpu_scalar(*t)) {
      if (!at::isIntegralType(t->scalar_type(), /*includeBool=*/true)) return std::nullopt;
      const double scale = second ? alpha : 1.0;
      if (scale != static_cast<double>(static_cast<int64_t>(scale))) return std::nullopt;
      host[second] = t->item().toLong() * static_cast<int64_t>(scale);
    } else if (is_device_integer(*t) && (!second || alpha == static_cast<double>(static_cast<int64_t>(alpha)))) {
      inputs.push_back(integer_words_input(*t));
    } else {
      return std::nullopt;  // floats (torch converts the int64 to float first)
    }
  }
  if (inputs.empty()) return std::nullopt;
  const at::Tensor out = record(op, inputs, comparison ? at::kBool : at::kInt, [&](Graph& g, const std::vector<int>& v) {
    size_t next = 0;
    const Int64Words a = operand_words(g, self, host[0], host[0] ? -1 : v[next++], op);
    Int64Words b = operand_words(g, other, host[1], host[1] ? -1 : v[next++], op);
    if (!host[1] && alpha != 1.0) b = kernels::mul_int64(g, b, kernels::int64_constant(g, static_cast<int64_t>(alpha), op), op);
    return comparison ? compare(g, e, a, b, op) : kernels::join_words(g, combine(g, e, a, b, op), op);
  }, [cpu, self, other](const std::vector<at::Tensor>&) { return cpu({self.cpu(), other.cpu()}); });
  // [1]-shaped constants broadcast a 0-d operand to [1]: the result takes torch's shape back
  const auto shape = at::infer_size(self.sizes(), other.sizes());
  return (comparison ? out : as_int64(out)).view(shape);
}

at::Tensor int64_exact_unary(const char* op, Int64Unary kind, const at::Tensor& self, const CpuFn& cpu) {
  const at::Tensor out = record(op, {int64_word_pairs(self)}, at::kInt, [&](Graph& g, const std::vector<int>& v) {
    const Int64Words x = kernels::split_words(g, v[0], op);
    const int negative = g.binary_scalar(ExprOp::Lt, x.hi, 0, false, op);
    const Int64Words minus = kernels::sub_int64(g, kernels::int64_constant(g, 0, op), x, op);
    if (kind == Int64Unary::Neg) return kernels::join_words(g, minus, op);
    if (kind == Int64Unary::Abs) return kernels::join_words(g, kernels::select_int64(g, negative, minus, x, op), op);
    const int nonzero = g.binary(ExprOp::Or, g.binary_scalar(ExprOp::Ne, x.lo, 0, false, op), g.binary_scalar(ExprOp::Ne, x.hi, 0, false, op), op);
    const int sign = g.where(negative, g.full({{1}, kernels::DType::I32}, -1, op), g.cast(nonzero, kernels::DType::I32, op), op);
    return kernels::join_words(g, kernels::widen_to_int64(g, sign, op), op);
  }, [cpu, self](const std::vector<at::Tensor>&) { return cpu({self.cpu()}); });
  return (kind == Int64Unary::Sign ? as_int64(out, 1) : as_int64(out)).view(self.sizes());  // a 0-d self stays 0-d
}

at::Tensor integer_extreme(const char* op, const at::Tensor& self, const std::vector<int64_t>& dims, bool max, bool position,
                           const CpuFn& cpu) {
  const bool words = self.scalar_type() == at::kLong;
  std::vector<int64_t> order, kept_shape;
  int64_t rows = 1, width = 1;
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (std::find(dims.begin(), dims.end(), d) != dims.end()) continue;
    order.push_back(d);
    kept_shape.push_back(self.size(d));
    rows *= self.size(d);
  }
  for (int64_t d : dims) {
    order.push_back(d);
    width *= self.size(d);
  }
  const bool pairs_out = words || position;
  const at::Tensor out = record(op, {integer_words_input(self)}, pairs_out ? at::kInt : self.scalar_type(), [&](Graph& g, const std::vector<int>& v) {
    Int64Words x = integer_words(g, self, v[0], op);
    for (int* word : {&x.lo, &x.hi}) {
      if (!std::is_sorted(order.begin(), order.end())) *word = g.permute(*word, order, op);
      *word = g.reshape(*word, {rows, width}, op);
    }
    const kernels::RowExtreme r = kernels::row_extreme_int64(g, x, max, /*int32_values=*/!words, op);
    if (position) return kernels::join_words(g, kernels::widen_to_int64(g, r.position, op), op);
    return words ? kernels::join_words(g, r.value, op) : g.cast(r.value.lo, g.node(v[0]).type.dtype, op);
  }, [cpu, self](const std::vector<at::Tensor>&) { return cpu({self.cpu()}); });
  if (!pairs_out) return out.reshape(kept_shape);
  return (position ? as_int64(out, width - 1) : as_int64(out)).reshape(kept_shape);
}

}  // namespace vtpu::bridge
