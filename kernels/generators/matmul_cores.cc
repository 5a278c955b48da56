// The matmul on a chip with several TensorCores (v4 and v5p megacore, v7): each core computes a
// contiguous share of C's rows, as XLA's megacore partitioning splits a parallel dimension.
// Rows, not columns: a row share is the same kernel on a shorter M with A, C and row-indexed
// epilogue operands offset to its first row, and every stride in the kernel (K, N; the launch's
// M, kept in a scratch slot) is unchanged. Each core reads all of B: B's traffic doubles, which
// a compute-bound product hides (bench/matmul_roofline.cc shows where it does not).
#include "kernels/generators/matmul_builder.h"

#include "kernels/codegen/core_share.h"
#include "kernels/codegen/vreg_shape.h"

namespace vtpu::kernels::matmul_detail {

void MatmulBuilder::take_core_share() {
  auto& r = w_.sregs();
  const int first = r.take(), end = r.take(), m = r.take(), t = r.take();
  w_.line("sarg s{}, {}", m, m_arg_);
  w_.line("sargw {}, s{}", m_pitch_arg_, m);
  // shares of ceil(M / 8) sublane rows, then in rows: first * 8, min(M, end * 8)
  w_.line("saddi s{}, s{}, {}", end, m, kSublanes - 1);
  w_.line("sshri s{}, s{}, 3", end, end);
  emit_core_share_or_halt(w_, first, end);  // more cores than 8-row units: nothing for some
  w_.line("sshli s{}, s{}, 3", first, first);
  w_.line("sshli s{}, s{}, 3", end, end);
  w_.line("smin s{}, s{}, s{}", end, end, m);
  w_.line("ssub s{}, s{}, s{}", end, end, first);
  w_.line("sargw {}, s{}", m_arg_, end);
  // Each row-indexed operand starts at row `first`: A [M, K] (A^T [K, M]: column `first`),
  // C and Full epilogue operands [M, N], Column epilogue operands [M].
  const auto offset = [&](int arg, int row_arg, int eb) {
    w_.line("sarg s{}, {}", m, arg);
    if (row_arg >= 0) {
      pitch(t, row_arg, eb);
      w_.line("smul s{}, s{}, s{}", t, t, first);
    } else {
      w_.line("smuli s{}, s{}, {}", t, first, eb);
    }
    w_.line("sadd s{}, s{}, s{}", m, m, t);
    w_.line("sargw {}, s{}", arg, m);
  };
  offset(a_arg_, spec_.a_transposed ? -1 : k_arg_, eb_a_);
  offset(c_arg_, n_arg_, eb_c_);
  for (const auto& e : epilogue_) {
    if (e.operand.layout == Layout::Full) offset(e.arg, n_arg_, e.eb);
    if (e.operand.layout == Layout::Column) offset(e.arg, -1, e.eb);
  }
  for (int x : {first, end, m, t}) r.release(x);
}

}  // namespace vtpu::kernels::matmul_detail
