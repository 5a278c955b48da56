#include "kernels/compose/cumsum.h"

#include <fmt/format.h>

#include <functional>
#include <limits>
#include <numeric>
#include <vector>

#include "kernels/codegen/kernel_error.h"

namespace vtpu::kernels {
namespace {

// scan([rows, n]) applied along `dim`: the scanned dim moved last and flattened to rows, and back.
int along_last(Graph& g, int x, int64_t dim, const char* label, const std::function<int(int flat)>& scan) {
  const auto shape = g.node(x).type.shape;
  const int64_t rank = static_cast<int64_t>(shape.size());
  if (dim < 0 || dim >= rank) throw KernelError(fmt::format("{}: dim {} of a {}-d tensor", label, dim, rank));
  const int64_t n = shape[dim];
  std::vector<int64_t> order(rank);
  std::iota(order.begin(), order.end(), 0);
  order.erase(order.begin() + dim);
  order.push_back(dim);
  const int last = dim == rank - 1 ? x : g.permute(x, order, label);
  const int64_t rows = n > 0 ? g.node(x).type.numel() / n : 0;
  std::vector<int64_t> moved;
  for (int64_t d : order) moved.push_back(shape[d]);
  const int scanned = g.reshape(scan(g.reshape(last, {rows, n}, label)), moved, label);
  if (dim == rank - 1) return scanned;
  // back: result dim d is moved dim inverse[d]
  std::vector<int64_t> inverse(rank);
  for (int64_t i = 0; i < rank; ++i) inverse[order[i]] = i;
  return g.permute(scanned, inverse, label);
}

// U [n, n], U[k][j] = (k <= j), in bf16 (exact)
int upper_ones(Graph& g, int64_t n, const char* label) {
  const int k = g.iota({{n, 1}, DType::I32}, label), j = g.iota({{n}, DType::I32}, label);
  return g.cast(g.binary(ExprOp::Le, k, j, label), DType::BF16, label);
}

// Rows longer than this are scanned in blocks: U is kScanBlock^2 (8 MiB in bf16), and a row costs
// n * kScanBlock multiply-adds rather than n^2.
constexpr int64_t kScanBlock = 2048;

// The inclusive scan of flat [rows, n], flat @ U: in one matmul up to kScanBlock long; longer rows
// in blocks of kScanBlock (zero-padded), each block scanned alike and then offset by the sum of
// the blocks before it, the scan of the blocks' totals shifted one block (itself blocked when
// long). The totals are whole f32 sums, so their scan takes 6 passes (three bf16 parts):
// f32-accurate, and exact for the integer sums below 2^24 that counts and byte planes make.
int scan_rows(Graph& g, int flat, int passes, const char* label) {
  const auto shape = g.node(flat).type.shape;
  const int64_t rows = shape[0], n = shape[1];
  if (n <= kScanBlock) return g.matmul(flat, upper_ones(g, n, label), false, passes, label);
  const int64_t blocks = (n + kScanBlock - 1) / kScanBlock, padded_n = blocks * kScanBlock;
  const int padded = padded_n > n ? g.pad(flat, 1, 0, padded_n - n, 0, label) : flat;
  const int within = g.matmul(g.reshape(padded, {rows * blocks, kScanBlock}, label), upper_ones(g, kScanBlock, label), false,
                              passes, label);
  // each block's total is its scan's last element
  const int totals = g.strided_copy(within, {rows, blocks}, {padded_n, kScanBlock}, kScanBlock - 1, label);
  const int through = scan_rows(g, totals, 6, label);
  const int before = g.pad(g.strided_copy(through, {rows, blocks - 1}, {blocks, 1}, 0, label), 1, 1, 0, 0, label);
  const int sum = g.reshape(g.binary(ExprOp::Add, g.reshape(within, {rows, blocks, kScanBlock}, label),
                                     g.reshape(before, {rows, blocks, 1}, label), label),
                            {rows, padded_n}, label);
  return padded_n > n ? g.strided_copy(sum, {rows, n}, {padded_n, 1}, 0, label) : sum;
}

void check_byte_scan_length(Graph& g, int x, int64_t dim, const char* label) {
  const auto& shape = g.node(x).type.shape;
  if (dim >= 0 && dim < static_cast<int64_t>(shape.size()) && shape[dim] > kMaxExactByteSum) {
    throw KernelError(fmt::format("{}: {} elements along dim {}; byte sums stay exact in f32 up to {}", label, shape[dim], dim,
                                  kMaxExactByteSum));
  }
}

}  // namespace

int cumsum(Graph& g, int x, int64_t dim, int passes) {
  return along_last(g, x, dim, "cumsum", [&](int flat) {
    const int f32 = g.node(flat).type.dtype == DType::F32 ? flat : g.cast(flat, DType::F32, "cumsum");
    return scan_rows(g, f32, passes, "cumsum");
  });
}

int float_cumsum(Graph& g, int x, int64_t dim, int passes) {
  const char* label = "cumsum";
  return along_last(g, x, dim, label, [&](int flat) {
    const int f32 = g.node(flat).type.dtype == DType::F32 ? flat : g.cast(flat, DType::F32, label);
    const auto constant = [&](double v) { return g.full({{1}, DType::F32}, v, label); };
    const auto scan_of_mask = [&](int mask) {  // how many so far: 0/1 values, one exact pass
      return scan_rows(g, g.cast(mask, DType::F32, label), 1, label);
    };
    // The triangle's zeros must not meet an infinity (0 * inf is NaN): finite values are scanned
    // alone, and where the CPU's running sum has met +inf (or NaN), -inf (or NaN), both, it is
    // +inf, -inf, NaN from there on.
    const int is_nan = g.binary(ExprOp::Ne, f32, f32, label);
    const int plus = g.binary_scalar(ExprOp::Eq, f32, std::numeric_limits<double>::infinity(), false, label);
    const int minus = g.binary_scalar(ExprOp::Eq, f32, -std::numeric_limits<double>::infinity(), false, label);
    const int finite = g.where(g.binary(ExprOp::Or, is_nan, g.binary(ExprOp::Or, plus, minus, label), label), constant(0),
                               f32, label);
    const int sum = scan_rows(g, finite, passes, label);
    const int met_plus = g.binary_scalar(ExprOp::Gt, scan_of_mask(g.binary(ExprOp::Or, plus, is_nan, label)), 0, false, label);
    const int met_minus = g.binary_scalar(ExprOp::Gt, scan_of_mask(g.binary(ExprOp::Or, minus, is_nan, label)), 0, false, label);
    const double inf = std::numeric_limits<double>::infinity();
    const int special = g.where(met_plus, constant(inf), constant(-inf), label);
    const int both = g.binary(ExprOp::And, met_plus, met_minus, label);
    return g.where(both, constant(std::numeric_limits<double>::quiet_NaN()),
                   g.where(g.binary(ExprOp::Or, met_plus, met_minus, label), special, sum, label), label);
  });
}

int cumsum_int32(Graph& g, int x, int64_t dim) {
  if (g.node(x).type.dtype != DType::I32) {
    throw KernelError(fmt::format("cumsum_int32: takes int32 values (got {})", to_string(g.node(x).type)));
  }
  check_byte_scan_length(g, x, dim, "cumsum_int32");
  return along_last(g, x, dim, "cumsum", [&](int flat) {
    int sum = -1;
    for (int b = 0; b < 4; ++b) {
      // one bf16 pass: a byte and U's ones are exact in bf16, their sums exact in f32
      const int digits = g.cast(g.byte_of(flat, b, "cumsum"), DType::F32, "cumsum");
      const int scanned = g.cast(scan_rows(g, digits, 1, "cumsum"), DType::I32, "cumsum");
      // the bytes' weights 2^(8b), multiplied and added in wrapping int32 as torch's int32 sum wraps
      const int weighted = b == 0 ? scanned : g.binary_scalar(ExprOp::Mul, scanned, double(int64_t{1} << (8 * b)), false, "cumsum");
      sum = b == 0 ? weighted : g.binary(ExprOp::Add, sum, weighted, "cumsum");
    }
    return sum;
  });
}

int cumsum_int64(Graph& g, int pairs, int64_t dim) {
  const Int64Words x = split_words(g, pairs, "cumsum");
  check_byte_scan_length(g, x.lo, dim, "cumsum_int64");
  const Int64Words sums = sum_int64_bytes(g, x, [&](int plane) {
    return along_last(g, plane, dim, "cumsum", [&](int flat) {
      // one bf16 pass: a byte and U's ones are exact in bf16, their sums exact in f32
      return scan_rows(g, flat, 1, "cumsum");
    });
  }, "cumsum");
  return join_words(g, sums, "cumsum");
}

}  // namespace vtpu::kernels
