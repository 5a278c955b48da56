// A block kernel's dot statement on the MXUs: row tiles in groups of the accumulator's slots,
// the MXUs side by side over the output's column strips, weights loaded a K slice at a time (f32
// weights staged as bf16 first, the form mxu.lw loads), and each group drained into the target
// (added to it when the statement accumulates: `acc[...] += pl.dot(x, y)`).
#include <fmt/format.h>

#include <algorithm>

#include "kernels/codegen/operand.h"
#include "kernels/codegen/vreg_shape.h"
#include "kernels/generators/block_kernel_body.h"

namespace vtpu::kernels {
namespace {

// Copies an f32 weight block into the staging area as bf16, the form mxu.lw loads.
void stage_weights(AsmWriter& w, const BlockKernelSpec& spec, const BlockLayout& l, int rhs, int dst_reg) {
  const BlockRef& r = spec.refs[rhs];
  BlockRef staged = r;
  staged.dtype = DType::BF16;
  auto& s = w.sregs();
  const int src = s.take(), dst = s.take(), n = s.take(), limit = s.take();
  load_block_base(w, l, spec, rhs, src);
  w.load_immediate(dst, l.staging);
  w.line("sli s{}, 0", n);
  w.load_immediate(limit, r.block_rows / kSublanes * (r.block_cols / kLanes));
  const std::string loop = w.new_label("stage"), row_done = w.new_label("stage_row");
  const int col = s.take(), cols = s.take();
  w.load_immediate(cols, r.block_cols / kLanes);
  w.line("sli s{}, 0", col);
  w.place(loop);
  w.line("vld v0, m0, s{}, 0, {}", src, row_stride_bytes(r));
  w.line("vst.bf16 v0, m0, s{}, 0, {}", dst, row_stride_bytes(staged));
  w.line("saddi s{}, s{}, {}", src, src, kLanes * 4);
  w.line("saddi s{}, s{}, {}", dst, dst, kLanes * 2);
  w.line("saddi s{}, s{}, 1", col, col);
  w.line("blt s{}, s{}, {}", col, cols, row_done);
  w.line("sli s{}, 0", col);  // next 8 rows: back to the row's start, down 8 rows
  w.line("saddi s{}, s{}, {}", src, src, kSublanes * row_stride_bytes(r) - r.block_cols * 4);
  w.line("saddi s{}, s{}, {}", dst, dst, kSublanes * row_stride_bytes(staged) - r.block_cols * 2);
  w.place(row_done);
  w.line("saddi s{}, s{}, 1", n, n);
  w.line("blt s{}, s{}, {}", n, limit, loop);
  w.load_immediate(dst_reg, l.staging);
  for (int reg : {src, dst, n, limit, col, cols}) s.release(reg);
}

}  // namespace

void emit_dot(AsmWriter& w, const BlockKernelSpec& spec, const BlockLayout& l, const BlockStatement& st,
              const sim::ChipConfig& chip) {
  const BlockRef& a = spec.refs[st.operands.at(0)];
  const BlockRef& b = spec.refs[st.operands.at(1)];
  const BlockRef& t = spec.refs[st.target];
  const int64_t d = chip.mxu_dim, group = d / kLanes;
  if (!dtype_is_float(a.dtype) || !dtype_is_float(b.dtype)) fail_block_kernel(spec, "dot multiplies float blocks (f32 or bf16)");
  if (a.block_cols != b.block_rows || a.block_rows != t.block_rows || b.block_cols != t.block_cols) {
    fail_block_kernel(spec, fmt::format("dot of ({}, {}) and ({}, {}) blocks into a ({}, {}) block", a.block_rows, a.block_cols,
                           b.block_rows, b.block_cols, t.block_rows, t.block_cols));
  }
  if (a.block_rows % kSublanes) fail_block_kernel(spec, "dot's left operand is a block of whole 8-row tiles");
  if (a.block_cols % d || b.block_cols % d) {
    fail_block_kernel(spec, fmt::format("dot's contracted and output widths ({}, {}) must be whole MXU widths ({}) on {}", a.block_cols,
                           b.block_cols, d, chip.name));
  }
  // Row tiles per accumulator set (a divisor of the block's), MXUs side by side (a divisor of
  // the block's column strips).
  int64_t slots = std::min<int64_t>(chip.mxu_acc_slots, a.block_rows / kSublanes);
  while ((a.block_rows / kSublanes) % slots) --slots;
  int64_t mxus = std::min<int64_t>(chip.mxu_per_core, b.block_cols / d);
  while ((b.block_cols / d) % mxus) --mxus;
  auto& s = w.sregs();
  const int lhs = s.take(), rhs = s.take(), out = s.take(), rg = s.take(), ng = s.take(), ks = s.take(), limit = s.take(),
            cursor = s.take(), weights = s.take();
  if (b.dtype == DType::F32) {
    stage_weights(w, spec, l, st.operands[1], rhs);
  } else {
    load_block_base(w, l, spec, st.operands[1], rhs);
  }
  const int64_t b_stride = b.block_cols * 2, a_stride = row_stride_bytes(a), t_stride = row_stride_bytes(t);
  load_block_base(w, l, spec, st.operands[0], lhs);
  load_block_base(w, l, spec, st.target, out);
  RegisterPool vregs("vector registers", 0, 31);
  const std::string rg_loop = w.new_label("dot_rows"), ng_loop = w.new_label("dot_cols"), ks_loop = w.new_label("dot_k");
  w.line("sli s{}, 0", rg);
  w.place(rg_loop);
  w.line("sli s{}, 0", ng);
  w.place(ng_loop);
  w.line("sli s{}, 0", ks);
  w.place(ks_loop);
  // Weights of this K slice for each MXU: rows ks*d.., columns (ng*mxus + j)*d..
  w.line("smuli s{}, s{}, {}", weights, ks, d * b_stride);
  w.line("sadd s{}, s{}, s{}", weights, weights, rhs);
  w.add_scaled(weights, ng, mxus * d * 2, cursor);
  for (int64_t j = 0; j < mxus; ++j) {
    w.line("saddi s{}, s{}, {}", cursor, weights, j * d * 2);
    w.line("mxu.lw mxu{}, s{}, {}", j, cursor, b_stride);
  }
  // LHS tiles of this row group and K slice: rows (rg*slots + r)*8, columns ks*d..
  w.line("smuli s{}, s{}, {}", cursor, ks, d * dtype_bytes(a.dtype));
  w.line("sadd s{}, s{}, s{}", cursor, cursor, lhs);
  w.add_scaled(cursor, rg, slots * kSublanes * a_stride, weights);
  const int ga = vregs.take_run(static_cast<int>(group) * 8, static_cast<int>(group));
  for (int64_t r = 0; r < slots; ++r) {
    const int v = ga + static_cast<int>((r % 8) * group);
    for (int64_t k = 0; k < group; ++k) {
      w.line("{} v{}, m0, s{}, {}, {}", load_mnemonic(a.dtype), v + k, cursor, k * kLanes * dtype_bytes(a.dtype), a_stride);
    }
    for (int64_t j = 0; j < mxus; ++j) w.line("mxu.mm mxu{}, v{}, {}", j, v, r);
    w.line("saddi s{}, s{}, {}", cursor, cursor, kSublanes * a_stride);
  }
  w.line("saddi s{}, s{}, 1", ks, ks);
  w.load_immediate(limit, a.block_cols / d);
  w.line("blt s{}, s{}, {}", ks, limit, ks_loop);
  // Drain: each slot of each MXU into its tile of the target (added to it when accumulating).
  w.line("smov s{}, s{}", cursor, out);
  w.add_scaled(cursor, rg, slots * kSublanes * t_stride, weights);
  w.add_scaled(cursor, ng, mxus * d * dtype_bytes(t.dtype), weights);
  const int acc = vregs.take_run(static_cast<int>(group) * 2, static_cast<int>(group));
  for (int64_t r = 0; r < slots; ++r) {
    for (int64_t j = 0; j < mxus; ++j) {
      const int v = ga + static_cast<int>(((r * mxus + j) % 8) * group);
      w.line("mxu.pop v{}, mxu{}, {}", v, j, r);
      for (int64_t k = 0; k < group; ++k) {
        const int64_t offset = (j * d + k * kLanes) * dtype_bytes(t.dtype);
        if (st.accumulate) {
          w.line("{} v{}, m0, s{}, {}, {}", load_mnemonic(t.dtype), acc + k, cursor, offset, t_stride);
          w.line("vadd v{}, v{}, v{}", v + k, v + k, acc + k);
        }
        w.line("{} v{}, m0, s{}, {}, {}", store_mnemonic(t.dtype), v + k, cursor, offset, t_stride);
      }
    }
    w.line("saddi s{}, s{}, {}", cursor, cursor, kSublanes * t_stride);
  }
  w.line("saddi s{}, s{}, 1", ng, ng);
  w.load_immediate(limit, b.block_cols / d / mxus);
  w.line("blt s{}, s{}, {}", ng, limit, ng_loop);
  w.line("saddi s{}, s{}, 1", rg, rg);
  w.load_immediate(limit, a.block_rows / kSublanes / slots);
  w.line("blt s{}, s{}, {}", rg, limit, rg_loop);
  for (int reg : {lhs, rhs, out, rg, ng, ks, limit, cursor, weights}) s.release(reg);
}

}  // namespace vtpu::kernels
