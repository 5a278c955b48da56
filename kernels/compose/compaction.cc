#include "kernels/compose/compaction.h"

#include <fmt/format.h>

#include "kernels/codegen/kernel_error.h"
#include "kernels/compose/cumsum.h"
#include "kernels/codegen/vreg_shape.h"

namespace vtpu::kernels {

namespace {

// Scans of up to this many elements are one matmul with an [m, m] triangular matrix.
constexpr int64_t kDirectScan = 1024;

// The exclusive prefix sums of v (f32 [m] of integers of magnitude up to `largest`), exact in f32
// while every sum stays below 2^24: rows of 128 scanned by the MXU, and their totals scanned the
// same way, recursively, so the work stays near m * 128 instead of m^2. One bf16 pass while the
// values are exact in bf16 (up to 256), six above (an f32 integer's three bf16 parts).
int exclusive_scan(Graph& g, int v, int64_t largest, const std::string& label) {
  const int64_t m = g.node(v).type.numel();
  const int passes = largest <= 256 ? 1 : 6;
  if (m <= kDirectScan) return g.binary(ExprOp::Sub, cumsum(g, v, 0, passes), v, label);
  const int64_t rows = (m + kLanes - 1) / kLanes, padded = rows * kLanes;
  const int flat = padded > m ? g.pad(v, 0, 0, padded - m, 0, label) : v;
  const int grid = g.reshape(flat, {rows, kLanes}, label);
  const int within = g.binary(ExprOp::Sub, cumsum(g, grid, 1, passes), grid, label);  // exclusive, along each row
  const int before = exclusive_scan(g, g.row(RowOp::Sum, grid, -1, -1, 1e-5, label), largest * kLanes, label);
  const int all = g.reshape(g.binary(ExprOp::Add, within, g.reshape(before, {rows, 1}, label), label), {padded}, label);
  return padded > m ? g.strided_copy(all, {m}, {1}, 0, label) : all;
}

// The mask's elements as f32 0/1 in one flat row; masks past kCompactionMaxElements are refused
// (positions and counts would no longer be exact in f32).
int flat_mask(Graph& g, int mask, const std::string& label) {
  const int64_t n = g.node(mask).type.numel();
  if (n > kCompactionMaxElements) {
    throw KernelError(fmt::format("{}: a mask of {} elements (at most {})", label, n, kCompactionMaxElements));
  }
  return g.cast(g.reshape(mask, {n}, label), DType::F32, label);
}

}  // namespace

int first_true_positions(Graph& g, int mask, int64_t size, const std::string& label) {
  if (size < 1) throw KernelError(fmt::format("{}: {} slots", label, size));
  const int flat = flat_mask(g, mask, label);
  const int64_t n = g.node(flat).type.numel();
  const int slot_f = exclusive_scan(g, flat, 1, label);
  // a true element within the first `size` goes to its slot; the others to the spare slot `size`
  const int kept = g.binary(ExprOp::And, g.cast(flat, DType::Bool, label),
                            g.binary_scalar(ExprOp::Lt, slot_f, double(size), false, label), label);
  const int slot = g.cast(g.where(kept, slot_f, g.full({{1}, DType::F32}, double(size), label), label), DType::I32, label);
  // positions + 1, so a slot no element reached (0) reads as -1
  const int positions = g.reshape(g.binary_scalar(ExprOp::Add, g.iota({{n}, DType::F32}, label), 1, false, label), {n, 1}, label);
  const int slots = g.scatter_add(positions, slot, /*index_pairs=*/false, size + 1, -1, label);  // [size + 1, 1]
  return g.binary_scalar(ExprOp::Sub, g.strided_copy(slots, {size}, {1}, 0, label), 1, false, label);
}

int true_positions(Graph& g, int mask, int64_t count, const std::string& label) {
  const int64_t n = g.node(mask).type.numel();
  if (count < 0 || count > n) throw KernelError(fmt::format("{}: {} true elements of {}", label, count, n));
  const int flat = flat_mask(g, mask, label);
  // a true element's slot: how many true elements come before it
  const int slot_f = exclusive_scan(g, flat, 1, label);
  const int on = g.cast(flat, DType::Bool, label);
  // false elements go to the spare slot `count`
  const int slot = g.cast(g.where(on, slot_f, g.full({{1}, DType::F32}, double(count), label), label), DType::I32, label);
  const int positions = g.reshape(g.iota({{n}, DType::F32}, label), {n, 1}, label);
  const int slots = g.scatter_add(positions, slot, /*index_pairs=*/false, count + 1, -1, label);  // [count + 1, 1]
  return g.strided_copy(slots, {count}, {1}, 0, label);
}

}  // namespace vtpu::kernels
