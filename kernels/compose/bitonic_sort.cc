// Sorting long rows with a bitonic network (kernels/compose/sort.h): log2(P) (log2(P) + 1) / 2 steps over
// rows padded to P = 2^p, each pairing element i with i + j inside blocks of 2j (strided copies
// of the two halves), comparing the pairs and writing back the smaller and larger (where), then
// joining the halves (concat). The order is a total one, so the network gives exactly the stable
// order: elements compare by (class, key, position), the class putting NaN after every number
// (ascending) or before it (descending) and the padding after everything.
#include <bit>

#include <fmt/format.h>

#include "kernels/codegen/kernel_error.h"
#include "kernels/compose/sort.h"

namespace vtpu::kernels {
namespace {

struct Keyed {
  int value, position;
};

}  // namespace

SortedRows bitonic_sort_rows(Graph& g, int x, bool descending, const std::string& label) {
  const auto shape = g.node(x).type.shape;
  if (shape.size() != 2 || g.node(x).type.dtype != DType::F32) throw KernelError("sort: expects f32 [rows, n]");
  const int64_t rows = shape[0], n = shape[1];
  const auto p_len = static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(std::max<int64_t>(n, 2))));
  if (p_len > kBitonicMaxLength) throw KernelError(fmt::format("sort: rows of {} exceed {} (positions exact in f32)", n, kBitonicMaxLength));
  // Every helper builds fresh nodes: a node read twice is materialised by the planner, so the
  // compare stays one fused expression. Class: 0 first, 2 last; NaN is the largest value, so
  // last ascending and first descending; the padding (positions >= n) after everything.
  const auto rank_class = [&](const Keyed& e) {
    const int nan = g.cast(g.binary(ExprOp::Ne, e.value, e.value, label), DType::F32, label);
    const int pad = g.cast(g.binary_scalar(ExprOp::Ge, e.position, double(n), false, label), DType::F32, label);
    const int special = descending ? g.binary_scalar(ExprOp::Sub, nan, 1.0, true, label) : nan;  // 1 - nan, or nan
    return g.binary(ExprOp::Add, special, g.binary_scalar(ExprOp::Mul, pad, descending ? 1.0 : 2.0, false, label), label);
  };
  const auto key = [&](const Keyed& e) { return descending ? g.unary(ExprOp::Neg, e.value, label) : e.value; };
  // a before b in the total order (class, key, position); keys that compare neither way (equal
  // numbers, or two NaN) fall to the positions
  const auto before = [&](const Keyed& a, const Keyed& b) {
    const auto lt = [&](const auto& x, const auto& y) { return g.binary(ExprOp::Lt, x(a), y(b), label); };
    const auto gt = [&](const auto& x, const auto& y) { return g.binary(ExprOp::Lt, y(b), x(a), label); };
    const auto not_ = [&](int m) { return g.unary(ExprOp::Not, m, label); };
    const auto and_ = [&](int l, int r) { return g.binary(ExprOp::And, l, r, label); };
    const auto or_ = [&](int l, int r) { return g.binary(ExprOp::Or, l, r, label); };
    const auto position = [](const Keyed& e) { return e.position; };
    const int by_key = or_(lt(key, key), and_(and_(not_(lt(key, key)), not_(gt(key, key))), lt(position, position)));
    return or_(lt(rank_class, rank_class), and_(and_(not_(lt(rank_class, rank_class)), not_(gt(rank_class, rank_class))), by_key));
  };
  Keyed row{g.pad(x, 1, 0, p_len - n, 0.0, label),
            g.binary(ExprOp::Add, g.full({{rows, 1}, DType::F32}, 0.0, label), g.iota({{p_len}, DType::F32}, label), label)};
  for (int64_t k = 2; k <= p_len; k *= 2) {
    for (int64_t j = k / 2; j >= 1; j /= 2) {
      const int64_t blocks = p_len / (2 * j);
      const auto half = [&](int v, int64_t offset) { return g.strided_copy(v, {rows, blocks, j}, {p_len, 2 * j, 1}, offset, label); };
      const Keyed lo{half(row.value, 0), half(row.position, 0)}, hi{half(row.value, j), half(row.position, j)};
      // block b runs ascending when bit k of its first element b * 2j is clear: (b / (k / 2j)) even
      const int b = g.iota({{blocks, 1}, DType::F32}, label);
      const int run = g.cast(g.binary_scalar(ExprOp::Div, b, double(k / (2 * j)), false, label), DType::I32, label);
      const int pair = g.cast(g.binary_scalar(ExprOp::Div, g.cast(run, DType::F32, label), 2.0, false, label), DType::I32, label);
      const int ascending = g.binary(ExprOp::Eq, run, g.binary_scalar(ExprOp::Mul, pair, 2.0, false, label), label);
      const int swap = g.where(ascending, before(hi, lo), before(lo, hi), label);
      const auto join = [&](int first, int second) {
        const int a = g.reshape(first, {rows, blocks, 1, j}, label), c = g.reshape(second, {rows, blocks, 1, j}, label);
        return g.reshape(g.concat({a, c}, 2, label), {rows, p_len}, label);
      };
      row = {join(g.where(swap, hi.value, lo.value, label), g.where(swap, lo.value, hi.value, label)),
             join(g.where(swap, hi.position, lo.position, label), g.where(swap, lo.position, hi.position, label))};
    }
  }
  // the padding sorted last: the first n of each row
  return {g.strided_copy(row.value, {rows, n}, {p_len, 1}, 0, label), g.strided_copy(row.position, {rows, n}, {p_len, 1}, 0, label)};
}

}  // namespace vtpu::kernels
