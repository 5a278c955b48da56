#include "kernels/compaction.h"

#include "kernels/asm_writer.h"
#include "kernels/cumsum.h"
#include "kernels/vreg_shape.h"

namespace vtpu::kernels {

int true_positions(Graph& g, int mask, int64_t count, const std::string& label) {
  const int64_t n = g.node(mask).type.numel();
  if (n > kCompactionMaxElements) {
    throw KernelError(fmt::format("{}: a mask of {} elements (at most {})", label, n, kCompactionMaxElements));
  }
  if (count < 0 || count > n) throw KernelError(fmt::format("{}: {} true elements of {}", label, count, n));
  const int64_t rows = (n + kLanes - 1) / kLanes, padded = rows * kLanes;
  int flat = g.cast(g.reshape(mask, {n}, label), DType::F32, label);
  if (padded > n) flat = g.pad(flat, 0, 0, padded - n, 0, label);
  const int grid = g.reshape(flat, {rows, kLanes}, label);
  // Counts of 0/1 values and row totals up to 128 are exact in one bf16 pass, sums in f32.
  const int within = cumsum(g, grid, 1, 1);                    // inclusive, along each row
  const int totals = g.row(RowOp::Sum, grid, -1, -1, 1e-5, label);
  const int before = g.binary(ExprOp::Sub, cumsum(g, totals, 0, 1), totals, label);  // exclusive, over rows
  const int inclusive = g.binary(ExprOp::Add, within, g.reshape(before, {rows, 1}, label), label);
  const int slot_all = g.binary_scalar(ExprOp::Sub, g.reshape(inclusive, {padded}, label), 1, false, label);
  const int slot_f = padded > n ? g.strided_copy(slot_all, {n}, {1}, 0, label) : slot_all;
  const int on = g.reshape(g.cast(flat, DType::Bool, label), {padded}, label);
  const int on_n = padded > n ? g.strided_copy(on, {n}, {1}, 0, label) : on;
  // false elements go to the spare slot `count`
  const int slot = g.cast(g.where(on_n, slot_f, g.full({{1}, DType::F32}, double(count), label), label), DType::I32, label);
  const int positions = g.reshape(g.iota({{n}, DType::F32}, label), {n, 1}, label);
  const int slots = g.scatter_add(positions, slot, /*index_pairs=*/false, count + 1, -1, label);  // [count + 1, 1]
  return g.strided_copy(slots, {count}, {1}, 0, label);
}

}  // namespace vtpu::kernels
