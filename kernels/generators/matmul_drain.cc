// Draining the matmul's accumulators: rows popped from every MXU, the fused epilogue applied,
// C tiles written back (the first pass's deferred into the second when that pays).
#include "kernels/generators/matmul_builder.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "kernels/codegen/bf16_parts.h"
#include "kernels/codegen/block_stream.h"
#include "kernels/codegen/tile_codegen.h"
#include "kernels/codegen/vreg_shape.h"

namespace vtpu::kernels::matmul_detail {

// Waits for what draining block s`block` (of `parity`) needs, and sets up its cursors.
MatmulBuilder::Drain MatmulBuilder::begin_drain(int block, int parity, RegisterPool& vregs) {
  auto& r = w_.sregs();
  Drain d;
  d.parity = parity;
  d.slot0 = parity * static_cast<int>(bm_ / kSublanes);
  const std::string free = w_.new_label("c_free");
  const int t = r.take();
  // this C buffer's previous write-back has landed (deferred blocks write their own buffers,
  // so the shared ones are first used by the two blocks after them)
  if (defer_) w_.line("saddi s{}, s{}, 2", t, deferred_blocks_);
  else w_.line("sli s{}, 2", t);
  w_.line("blt s{}, s{}, {}", block, t, free);
  w_.line("sem.wait sem{}, {}", kSemOutput + parity, drain_parts());
  w_.place(free);
  r.release(t);
  d.bt = r.take();
  d.nb = r.take();
  d.mb = r.take();
  decode(block, d.bt, d.nb, d.mb);
  for (auto& e : epilogue_) {
    if (e.operand.layout == Layout::Scalar) continue;
    e.cursor = r.take();
    if (e.operand.layout == Layout::Full) w_.load_immediate(e.cursor, e.vmem[parity]);
    if (e.operand.layout == Layout::Row) w_.line("smuli s{}, s{}, {}", e.cursor, d.nb, bn_ * e.eb);
    if (e.operand.layout == Layout::Column) w_.line("smuli s{}, s{}, {}", e.cursor, d.mb, bm_ * e.eb);
    if (e.operand.layout != Layout::Full) w_.line("saddi s{}, s{}, {}", e.cursor, e.cursor, e.vmem[0]);
  }
  d.crow = r.take();
  c_tile(d.crow, block, d.mb, parity);
  if (defer_) {  // the write-backs need the tile's start (the shared ones are immediates)
    d.tile = r.take();
    w_.line("smov s{}, s{}", d.tile, d.crow);
  }
  d.scratch = r.take();
  d.acc = vregs.take_run(group_);
  return d;
}

int MatmulBuilder::full_epilogue_inputs() const {
  int n = 0;
  for (const auto& e : epilogue_) n += e.operand.layout == Layout::Full;
  return n;
}

// Pops accumulator row tile `rt` of every MXU, applies the epilogue and stores it to C in VMEM.
void MatmulBuilder::drain_row(Drain& d, int rt, RegisterPool& vregs, RegisterPool& masks) {
  TileCodegen codegen(w_, vregs, masks, d.scratch);
  Expr identity;
  identity.add_output(identity.input(0, ValueType::F32));
  const Expr& expr = spec_.epilogue ? *spec_.epilogue : identity;
  for (int j = 0; j < mxus_; ++j) {
    w_.line("mxu.pop v{}, mxu{}, {}", d.acc, j, d.slot0 + rt);
    for (int q = 0; q < group_; ++q) {
      const int64_t col = int64_t(j) * d_ + q * kLanes;  // column within the block
      std::vector<std::pair<int, TileValue>> preset = {{0, {ValueType::F32, d.acc + q}}};
      for (size_t i = 0; i < epilogue_.size(); ++i) {
        if (epilogue_[i].preset_vreg >= 0) {
          preset.push_back({static_cast<int>(i) + 1, {register_type(epilogue_[i].operand.dtype), epilogue_[i].preset_vreg}});
        }
      }
      const auto load = [&](int operand, int vreg) {
        const EpilogueBuffer& e = epilogue_.at(operand - 1);
        const int64_t offset = e.operand.layout == Layout::Column ? rt * kSublanes * e.eb : col * e.eb;
        load_operand_tile(w_, e.operand.dtype, e.operand.layout, vreg, e.cursor, offset, bn_ * e.eb);
      };
      const auto out = codegen.emit(expr, load, preset);
      const TileValue v = codegen.to_type(out[0], ValueType::F32, false);
      w_.line("{} v{}, m0, s{}, {}, {}", store_mnemonic(spec_.out_dtype), v.reg, d.crow, col * eb_c_, bn_ * eb_c_);
      if (v.reg != out[0].reg || v.type != out[0].type) codegen.release(v);
      if (!(out[0].type == ValueType::F32 && out[0].reg == d.acc + q)) codegen.release(out[0]);
    }
  }
  w_.line("saddi s{}, s{}, {}", d.crow, d.crow, kSublanes * bn_ * eb_c_);
  for (auto& e : epilogue_) {
    if (e.operand.layout == Layout::Full) w_.line("saddi s{}, s{}, {}", e.cursor, e.cursor, kSublanes * bn_ * e.eb);
  }
}

// dst = the VMEM address of block s`block`'s C tile: its own deferred tile (row block s`mb`) when
// the block is deferred, else the shared one of its parity.
void MatmulBuilder::c_tile(int dst, int block, int mb, int parity) {
  w_.load_immediate(dst, c_vmem_[parity]);
  if (!defer_) return;
  const std::string shared = w_.new_label("shared_tile");
  w_.line("bge s{}, s{}, {}", block, deferred_blocks_, shared);
  w_.line("smuli s{}, s{}, {}", dst, mb, int64_t(c_tile_bytes_));
  w_.line("saddi s{}, s{}, {}", dst, dst, int64_t(c_deferred_vmem_));
  w_.place(shared);
}

// Writes rows [first, first + count) of the drained C tile at s`tile` (tile < 0: the shared
// tile of `parity`) back to HBM, clipped to the valid rows, signalling `sem`. When none are
// valid nothing is issued, but with `always_signal` the semaphore is signalled anyway, so
// whoever waits for the block's parts counts them all.
void MatmulBuilder::write_back(int bt, int nb, int mb, int parity, int tile, int sem, int64_t first, int64_t count, bool always_signal) {
  auto& r = w_.sregs();
  const int row0 = r.take(), col0 = r.take(), rows = r.take(), cols = r.take(), hb = r.take(), t = r.take();
  const std::string skip = w_.new_label("no_rows");
  w_.line("smuli s{}, s{}, {}", row0, mb, bm_);
  w_.line("saddi s{}, s{}, {}", row0, row0, first);
  w_.line("smuli s{}, s{}, {}", col0, nb, bn_);
  row_extent(rows, row0, count);
  w_.line("bge s0, s{}, {}", rows, skip);
  extent(cols, col0, n_arg_, bn_);
  w_.line("sarg s{}, {}", hb, c_arg_);
  add_batch_offset(hb, bt, n_pitch_arg_, eb_c_, t);
  add_pitched(hb, row0, n_pitch_arg_, eb_c_, t);
  w_.add_scaled(hb, col0, eb_c_, t);
  w_.line("smuli s{}, s{}, {}", t, cols, eb_c_);
  if (tile >= 0) w_.line("saddi s{}, s{}, {}", col0, tile, first * bn_ * eb_c_);
  else w_.load_immediate(col0, c_vmem_[parity] + first * bn_ * eb_c_);
  dma(false, sem, col0, hb, rows, t, bn_ * eb_c_, n_pitch_arg_, eb_c_);
  if (always_signal) {
    const std::string done = w_.new_label("written");
    w_.line("jmp {}", done);
    w_.place(skip);
    w_.line("sem.signal sem{}, 1", sem);
    w_.place(done);
  } else {
    w_.place(skip);
  }
  for (int x : {row0, col0, rows, cols, hb, t}) r.release(x);
}

void MatmulBuilder::write_back_deferred(int block) {
  auto& r = w_.sregs();
  const std::string skip = w_.new_label("no_deferred"), short_pass = w_.new_label("short_pass");
  const int mb = r.take(), tile = r.take();
  w_.line("ssub s{}, s{}, s{}", mb, block, deferred_blocks_);
  w_.line("sli s{}, {}", tile, kDeferredLead + 1);
  w_.line("blt s{}, s{}, {}", deferred_blocks_, tile, short_pass);
  w_.line("saddi s{}, s{}, {}", mb, mb, kDeferredLead);
  w_.place(short_pass);
  w_.line("blt s{}, s0, {}", mb, skip);
  w_.line("bge s{}, s{}, {}", mb, deferred_blocks_, skip);
  w_.line("smuli s{}, s{}, {}", tile, mb, int64_t(c_tile_bytes_));
  w_.line("saddi s{}, s{}, {}", tile, tile, int64_t(c_deferred_vmem_));
  write_back(/*bt=*/0, /*nb=*/0, mb, 0, tile, kSemDeferred, 0, bm_, false);  // s0 reads 0
  w_.place(skip);
  for (int x : {mb, tile}) r.release(x);
}

void MatmulBuilder::release_drain(Drain& d, RegisterPool& vregs) {
  auto& r = w_.sregs();
  vregs.release_run(d.acc, group_);
  for (int x : {d.scratch, d.bt, d.nb, d.mb, d.crow}) r.release(x);
  if (d.tile >= 0) r.release(d.tile);
  for (auto& e : epilogue_) {
    if (e.cursor >= 0) r.release(e.cursor);
    e.cursor = -1;
  }
}

// Drains the last block, each 8-row tile written back as soon as it is drained: the write-back
// of the last block's C cannot hide behind anything, so it starts as early as it can.
void MatmulBuilder::final_drain(int block, int parity, RegisterPool& vregs, RegisterPool& masks) {
  Drain d = begin_drain(block, parity, vregs);
  for (int64_t rt = 0; rt < bm_ / kSublanes; ++rt) {
    drain_row(d, static_cast<int>(rt), vregs, masks);
    write_back(d.bt, d.nb, d.mb, d.parity, d.tile, kSemOutput + d.parity, rt * kSublanes, kSublanes, false);
  }
  release_drain(d, vregs);
}

}  // namespace vtpu::kernels::matmul_detail
