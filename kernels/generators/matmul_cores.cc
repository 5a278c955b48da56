// The matmul on a chip with several TensorCores (v4 and v5p megacore, v7): each core computes a
// contiguous share of C, as XLA's megacore partitioning splits a parallel dimension.
//  - Rows (8-row units) when M >= N: a row share is the same kernel on a shorter M with A, C and
//    row-indexed epilogue operands offset to its first row. Each core reads all of B, which a
//    compute-bound product hides (bench/matmul_roofline.cc shows where it does not).
//  - Columns (D-column units) when M < N and N has a unit for every core: the same kernel on a
//    narrower N with B, C and column-indexed epilogue operands offset to its first column. Each
//    core reads all of A, the smaller input. A decode step's [8, K] @ [K, N] has one row unit:
//    split by rows it would leave a core idle and the other streaming all of B alone.
// Every stride in the kernel (K; the launch's M and N, kept in scratch slots) is unchanged, so
// each core computes its elements exactly as one core would.
#include "kernels/generators/matmul_builder.h"

#include "kernels/codegen/core_share.h"
#include "kernels/codegen/vreg_shape.h"

namespace vtpu::kernels::matmul_detail {

void MatmulBuilder::take_core_share() {
  auto& r = w_.sregs();
  const int first = r.take(), end = r.take(), m = r.take(), t = r.take();
  w_.line("sarg s{}, {}", m, m_arg_);
  w_.line("sargw {}, s{}", m_pitch_arg_, m);
  w_.line("sarg s{}, {}", t, n_arg_);
  w_.line("sargw {}, s{}", n_pitch_arg_, t);
  // s`arg` (the launch's size in `size_arg`) += first * (a row of `row_arg` elements, or one
  // element when row_arg < 0) * eb: the operand's first row or column of this core's share.
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
  // s`end` = the units of `unit` elements in the launch's `size_arg`; narrows it to this core's
  // share (a core with none halts) and leaves the share's first element in s`first`.
  const auto narrow = [&](int size_arg, int64_t unit) {
    w_.line("sarg s{}, {}", t, size_arg);
    w_.line("saddi s{}, s{}, {}", end, t, unit - 1);
    w_.line("sli s{}, {}", first, unit);
    w_.line("sdiv s{}, s{}, s{}", end, end, first);
    emit_core_share_or_halt(w_, first, end);
    w_.line("smuli s{}, s{}, {}", first, first, unit);
    w_.line("smuli s{}, s{}, {}", end, end, unit);
    w_.line("smin s{}, s{}, s{}", end, end, t);
    w_.line("ssub s{}, s{}, s{}", end, end, first);
    w_.line("sargw {}, s{}", size_arg, end);
  };
  const std::string by_rows = w_.new_label("share_rows"), shared = w_.new_label("shared");
  // columns when M < N and ceil(N / D) >= cores (s`m` and s`t` still hold M and N)
  w_.line("bge s{}, s{}, {}", m, t, by_rows);
  w_.line("saddi s{}, s{}, {}", end, t, d_ - 1);
  w_.line("sli s{}, {}", first, d_);
  w_.line("sdiv s{}, s{}, s{}", end, end, first);
  w_.line("sncore s{}", first);
  w_.line("blt s{}, s{}, {}", end, first, by_rows);
  narrow(n_arg_, d_);
  offset(b_arg_, spec_.b_transposed ? k_arg_ : -1, eb_b_);  // B [K, N] (B^T [N, K]: row `first`)
  offset(c_arg_, -1, eb_c_);
  for (const auto& e : epilogue_) {
    if (e.operand.layout == Layout::Full || e.operand.layout == Layout::Row) offset(e.arg, -1, e.eb);
  }
  w_.line("jmp {}", shared);
  w_.place(by_rows);
  narrow(m_arg_, kSublanes);
  // A [M, K] (A^T [K, M]: column `first`), C and Full epilogue operands [M, N], Column ones [M]
  offset(a_arg_, spec_.a_transposed ? -1 : k_arg_, eb_a_);
  offset(c_arg_, n_pitch_arg_, eb_c_);
  for (const auto& e : epilogue_) {
    if (e.operand.layout == Layout::Full) offset(e.arg, n_pitch_arg_, e.eb);
    if (e.operand.layout == Layout::Column) offset(e.arg, -1, e.eb);
  }
  w_.place(shared);
  for (int x : {first, end, m, t}) r.release(x);
}

}  // namespace vtpu::kernels::matmul_detail
