// The matmul's compute loop: per block, per K slice, weights loaded (into the back buffers
// ahead of the slice where that pipelines), LHS rows pushed, the next block's inputs issued and
// the previous block drained between the pushes; the launch's shape checked first.
#include "kernels/generators/matmul_builder.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "kernels/codegen/bf16_parts.h"
#include "kernels/codegen/block_stream.h"
#include "kernels/codegen/tile_codegen.h"
#include "kernels/codegen/vreg_shape.h"

namespace vtpu::kernels::matmul_detail {

// Loads slice kt + 1's weights into the back buffers, when this block reads its B panel from
// HBM (`streaming`, waiting for the piece first) or when it does not. On the last slice, the
// non-streaming call loads the next block's slice 0 instead when that block reads the same
// panel (it is not a panel's first row block), so block boundaries swap too; a next block that
// starts a panel waits for its piece and loads its own. Uses s`scratch` (free between matmul
// rows).
void MatmulBuilder::emit_next_weights(const Compute& c, int scratch, bool streaming) {
  const std::string skip = w_.new_label("no_next_weights");
  const std::string not_last = w_.new_label("not_last_slice");
  w_.line("saddi s{}, s{}, {}", scratch, c.kt, 1 - kt_);
  w_.line("blt s{}, s0, {}", scratch, not_last);
  if (!streaming) {
    // the next block's slice 0, from this panel, when it exists and continues the panel
    w_.line("bge s{}, s{}, {}", c.next, c.nblocks, skip);
    w_.line("saddi s{}, s{}, 1", scratch, c.mb);
    w_.line("bge s{}, s{}, {}", scratch, row_blocks_, skip);
    w_.line("smov s{}, s{}", scratch, c.panel);
    load_weights_from(scratch, true);
  }
  w_.line("jmp {}", skip);
  w_.place(not_last);
  w_.line("{} s{}, s0, {}", streaming ? "bne" : "beq", c.mb, skip);
  if (streaming) w_.line("sem.wait sem{}, 1", kSemPanel);  // B(kt + 1)
  w_.line("smuli s{}, s{}, {}", scratch, c.kt, weight_slice_bytes_);
  w_.line("saddi s{}, s{}, {}", scratch, scratch, weight_slice_bytes_);
  w_.line("sadd s{}, s{}, s{}", scratch, scratch, c.panel);
  load_weights_from(scratch, true);
  w_.place(skip);
}

// Waits for what slice s`c.kt` needs before its first matmul row: B's piece (converted into weight
// parts when staged; with pipelined weights only slice 0 of a panel's first row block waits and
// loads, every other slice switches to the weights loaded during the slice before) and A's piece
// (transposed into the A panel when given as [K, M]). s`t` is scratch.
void MatmulBuilder::wait_for_slice(const Compute& c, const std::string& have_a, const std::string& have_b, int t,
                                   RegisterPool& vregs, RegisterPool& masks, int zero) {
  if (pipelined()) {
    // Slice 0 of a panel's first row block waits for its piece and loads its weights; every
    // other slice switches to the ones loaded during the slice before (emit_next_weights),
    // which waited for their B piece there.
    const std::string later = w_.new_label("later_slice"), ready = w_.new_label("weights_ready");
    w_.line("bne s{}, s0, {}", c.kt, later);
    w_.line("bne s{}, s0, {}", c.mb, later);
    w_.line("sem.wait sem{}, 1", kSemPanel);
    w_.line("smov s{}, s{}", t, c.panel);
    load_weights_from(t, false);
    w_.line("jmp {}", ready);
    w_.place(later);
    for (int j = 0; j < mxus_; ++j) w_.line("mxu.swap mxu{}", j);
    w_.place(ready);
  } else {
    w_.line("bne s{}, s0, {}", c.mb, have_b);
    w_.line("sem.wait sem{}, 1", kSemPanel);
    if (staged_) convert_slice(c.kt, c.panel, c.staging, vregs, masks, zero);
    w_.place(have_b);
  }
  skip_unless_a_needed(c.nb, have_a);
  w_.line("sem.wait sem{}, 1", kSemInput);
  if (spec_.a_transposed) transpose_a_slice(c.kt, c.a_base, c.parity, vregs);
  w_.place(have_a);
}

// Loads stored weight part `part` (weight_part) of slice s`c.kt` into every MXU, into the back
// buffers only when `back_buffer`; s`wt` and s`t` are scratch.
void MatmulBuilder::load_weight_part(const Compute& c, int part, int wt, int t, bool back_buffer) {
  w_.line("smuli s{}, s{}, {}", wt, c.kt, weight_slice_bytes_);
  w_.line("sadd s{}, s{}, s{}", wt, wt, c.panel);
  w_.line("saddi s{}, s{}, {}", t, wt, int64_t(part) * int64_t(part_bytes_));
  load_weights_from(t, back_buffer);
}

void MatmulBuilder::load_weights_from(int addr, bool back_buffer) {
  const char* load = weights_transposed_ ? (back_buffer ? "mxu.lwb.t" : "mxu.lw.t") : (back_buffer ? "mxu.lwb" : "mxu.lw");
  for (int j = 0; j < mxus_; ++j) {
    if (j > 0) w_.line("saddi s{}, s{}, {}", addr, addr, weight_mxu_bytes_);
    w_.line("{} mxu{}, s{}, {}", load, j, addr, weight_stride_);
  }
}

// One K slice: wait for its pieces (converting B's if staged), load the weights, issue the same
// slice of the next block and stream the LHS rows. With `drain`, accumulator row tiles
// [drain_first, drain_end) of the previous block are popped between this slice's first matmul
// rows (their slots were filled long before), so the MXUs never idle while a block drains.
void MatmulBuilder::emit_slice(const Compute& c, Drain* drain, RegisterPool& vregs, RegisterPool& masks, int64_t drain_first, int64_t drain_end) {
  auto& r = w_.sregs();
  const std::string have_a = w_.new_label("have_a"), have_b = w_.new_label("have_b"),
                    no_prefetch = w_.new_label("no_prefetch");
  int row = -1, wt = -1, t = -1;
  const auto take = [&] { row = r.take(), wt = r.take(), t = r.take(); };
  take();
  // Finite forms (finite_passes_) are made against one zero vreg per slice.
  const int zero = finite_passes_ ? vregs.take() : -1;
  if (finite_passes_) w_.line("vbcast v{}, s0", zero);
  wait_for_slice(c, have_a, have_b, t, vregs, masks, zero);
  const int slot0 = c.parity * static_cast<int>(bm_ / kSublanes);
  int last_weights = pipelined() ? 0 : -1;  // pipelined: the weights are in place already
  int in_back = -1;  // the weight part loaded into the back buffers ahead of its passes
  for (size_t pass = 0; pass < pairs_.size(); ++pass) {
    if (weight_part(pairs_[pass]) != last_weights) {
      last_weights = weight_part(pairs_[pass]);
      if (in_back == last_weights) {
        for (int j = 0; j < mxus_; ++j) w_.line("mxu.swap mxu{}", j);
      } else {
        load_weight_part(c, last_weights, wt, t, false);
      }
    }
    if (pass == 0) {
      // The same slice of the next block, issued after the weight load so its scalar work
      // never delays the load (the front end reaches a slice's load just in time).
      for (int x : {row, wt, t}) r.release(x);
      w_.line("bge s{}, s{}, {}", c.next, c.nblocks, no_prefetch);
      const BlockRegs ahead = open_block(c.next);
      issue_slice(ahead, c.kt, 1 - c.parity);
      close_block(ahead);
      w_.place(no_prefetch);
      if (panels_ahead_) issue_next_panel_piece(c);
      take();
    }
    // The slice's next weight part goes into the back buffers before this pass's rows: it loads
    // while they are multiplied (once the pass before this one is done with those buffers), and
    // its passes begin with a swap instead of waiting for a load.
    if (pass + 1 < pairs_.size() && weight_part(pairs_[pass + 1]) != last_weights) {
      in_back = weight_part(pairs_[pass + 1]);
      load_weight_part(c, in_back, wt, t, true);
    }
    // Row tiles past M's end (known only at launch) are skipped tile by tile, in a copy of the
    // loop placed out of line: most blocks are full, and the checks (or a taken branch) would
    // cost the front end issue slots the MXUs wait on. s`t` = rows left from this block's
    // first; s`wt` is free until the next pass's weights.
    const std::string ragged = w_.new_label("ragged_block"), rejoin = w_.new_label("rejoin");
    w_.line("smuli s{}, s{}, {}", t, c.mb, bm_);
    w_.line("sarg s{}, {}", row, m_arg_);
    w_.line("ssub s{}, s{}, s{}", t, row, t);
    w_.load_immediate(row, bm_);
    w_.line("blt s{}, s{}, {}", t, row, ragged);
    const auto row_tiles = [&](bool checked) {
      w_.line("smuli s{}, s{}, {}", row, c.kt, d_ * eb_a_);
      w_.line("sadd s{}, s{}, s{}", row, row, c.a_base);
      for (int rt = 0; rt < bm_ / kSublanes; ++rt) {
        const std::string skip = w_.new_label("no_rows");
        if (checked && rt > 0) {  // tile 0 always holds a row
          w_.load_immediate(wt, rt * kSublanes);
          w_.line("bge s{}, s{}, {}", wt, t, skip);
        }
        const int g = vregs.take_run(group_);
        // s`wt`: where this tile's finite LHS rows lie (finite_passes_)
        if (finite_passes_) w_.load_immediate(wt, int64_t(finite_a_vmem_) + rt * kSublanes * d_ * 4);
        const bool finite = multiplies_finite_forms(pairs_[pass], finite_passes_);
        load_lhs(g, finite ? wt : row, pairs_[pass], vregs);
        for (int j = 0; j < mxus_; ++j) w_.line("mxu.mm mxu{}, v{}, {}", j, g, slot0 + rt);
        if (finite_passes_ && !finite) store_finite_lhs(g, wt, vregs, masks, zero);
        vregs.release_run(g, group_);
        w_.line("saddi s{}, s{}, {}", row, row, kSublanes * k_pad_ * eb_a_);
        w_.place(skip);
        // Over the first quarter of the slice: the write-back after it reads what the drain
        // stored, so the drain must be done well before the slice's last matmul row is issued.
        const int64_t span = std::max<int64_t>(1, bm_ / kSublanes / 4), count = drain_end - drain_first;
        for (int64_t dr = drain_first + rt * count / span; drain && pass == 0 && dr < std::min(drain_end, drain_first + (rt + 1) * count / span); ++dr) {
          drain_row(*drain, static_cast<int>(dr), vregs, masks);
        }
        // The next slice's weights: right away when this block reuses a loaded B panel, half
        // way through when its piece is still streaming in (waiting for it at the start would
        // hold up this slice's matmuls behind the DMA).
        if (pipelined() && rt == 0) emit_next_weights(c, wt, false);
        if (pipelined() && rt == std::max<int64_t>(1, bm_ / kSublanes / 2) - (bm_ / kSublanes == 1)) {
          emit_next_weights(c, wt, true);
        }
      }
    };
    row_tiles(false);
    w_.place(rejoin);
    w_.cold([&] {
      w_.place(ragged);
      row_tiles(true);
      w_.line("jmp {}", rejoin);
    });
  }
  for (int x : {row, wt, t}) r.release(x);
  if (finite_passes_) vregs.release(zero);
}

void MatmulBuilder::compute_block(int block, int next, int nblocks, int parity, RegisterPool& vregs, RegisterPool& masks) {
  auto& r = w_.sregs();
  Compute c{block, next, nblocks, parity, r.take(), r.take(), r.take(), r.take(), r.take(), staged_ ? r.take() : -1, r.take()};
  decode(block, c.bt, c.nb, c.mb);
  const int t = r.take();
  if (a_resident_) {
    w_.line("smuli s{}, s{}, {}", c.a_base, c.mb, int64_t(a_panel_bytes_));
    w_.line("saddi s{}, s{}, {}", c.a_base, c.a_base, a_vmem_[0]);
  } else {
    w_.load_immediate(c.a_base, a_vmem_[parity]);
  }
  panel_parity(c.panel, c.bt, c.nb, t);
  if (staged_) {
    w_.line("smuli s{}, s{}, {}", c.staging, c.panel, int64_t(staging_bytes_));
    w_.line("saddi s{}, s{}, {}", c.staging, c.staging, staging_vmem_);
  }
  w_.line("smuli s{}, s{}, {}", c.panel, c.panel, int64_t(b_stored_parts_ * part_bytes_));
  w_.line("saddi s{}, s{}, {}", c.panel, c.panel, panel_vmem_);
  r.release(t);
  const std::string loop = w_.new_label("k_slice"), after = w_.new_label("k_done");
  w_.line("sli s{}, 0", c.kt);
  w_.line("beq s{}, s0, {}", block, loop);  // block 0 has no predecessor to drain
  {
    // The first slices with the previous block's drain folded in. Its Full epilogue tiles were
    // issued before this block's slices, so they are waited for first.
    if (full_epilogue_inputs()) w_.line("sem.wait sem{}, {}", kSemInput, full_epilogue_inputs());
    const int prev = r.take();
    w_.line("saddi s{}, s{}, -1", prev, block);
    Drain d = begin_drain(prev, 1 - parity, vregs);
    r.release(prev);
    const int64_t tiles = bm_ / kSublanes;
    for (int part = 0; part < drain_parts(); ++part) {
      const int64_t first = tiles * part / drain_parts(), end = tiles * (part + 1) / drain_parts();
      if (part > 0) w_.line("sli s{}, {}", c.kt, part);
      emit_slice(c, &d, vregs, masks, first, end);
      const std::string deferred = w_.new_label("deferred");
      if (defer_) {  // the previous block, when deferred, is written back in the second pass
        const int t = r.take();
        w_.line("saddi s{}, s{}, -1", t, block);
        w_.line("blt s{}, s{}, {}", t, deferred_blocks_, deferred);
        r.release(t);
      }
      write_back(d.bt, d.nb, d.mb, d.parity, d.tile, kSemOutput + d.parity, first * kSublanes, (end - first) * kSublanes, true);
      w_.place(deferred);
    }
    release_drain(d, vregs);
    if (defer_) write_back_deferred(block);
    w_.line("sli s{}, {}", c.kt, drain_parts());
    const int nkt = r.take();
    w_.load_immediate(nkt, kt_);
    w_.line("bge s{}, s{}, {}", c.kt, nkt, after);
    r.release(nkt);
  }
  w_.place(loop);
  emit_slice(c, nullptr, vregs, masks);
  const int nkt = r.take();
  w_.load_immediate(nkt, kt_);
  w_.line("saddi s{}, s{}, 1", c.kt, c.kt);
  w_.line("blt s{}, s{}, {}", c.kt, nkt, loop);
  r.release(nkt);
  w_.place(after);
  const std::string no_prefetch = w_.new_label("no_prefetch");
  w_.line("bge s{}, s{}, {}", next, nblocks, no_prefetch);
  {
    const BlockRegs ahead = open_block(next);
    issue_epilogue_tiles(ahead, 1 - parity);
    close_block(ahead);
  }
  w_.place(no_prefetch);
  for (int x : {c.bt, c.nb, c.mb, c.a_base, c.panel, c.kt}) r.release(x);
  if (c.staging >= 0) r.release(c.staging);
}

void MatmulBuilder::emit() {
  auto& r = w_.sregs();
  RegisterPool vregs("vector registers", 0, 31), masks("mask registers", 1, 7);
  const int block = r.take(), next = r.take(), nblocks = r.take();
  check_shape(block, next);
  take_core_share();
  load_broadcast_operands(vregs);
  row_blocks_ = r.take();  // held for the whole program: every block decodes its index with it
  row_blocks(row_blocks_, block);
  column_blocks(next);
  if (defer_) {  // D = the row blocks when N has a second column block to write them back in, else 0
    deferred_blocks_ = r.take();
    const std::string single = w_.new_label("single_pass");
    w_.line("sli s{}, 0", deferred_blocks_);
    w_.line("sli s{}, 2", block);
    w_.line("blt s{}, s{}, {}", next, block, single);
    w_.line("smov s{}, s{}", deferred_blocks_, row_blocks_);
    w_.place(single);
  }
  w_.line("smul s{}, s{}, s{}", nblocks, row_blocks_, next);
  w_.line("smuli s{}, s{}, {}", nblocks, nblocks, spec_.batch);
  w_.line("sli s{}, 0", block);
  issue_first_block(block);
  const std::string top = w_.new_label("block"), done = w_.new_label("done");
  w_.place(top);
  for (int parity = 0; parity < 2; ++parity) {
    w_.line("saddi s{}, s{}, 1", next, block);
    compute_block(block, next, nblocks, parity, vregs, masks);
    w_.line("smov s{}, s{}", block, next);
    w_.line("bge s{}, s{}, {}", block, nblocks, done);
  }
  w_.line("jmp {}", top);
  w_.place(done);
  // The last block is drained after the loop, with the parity the launch's block count gives.
  if (full_epilogue_inputs()) w_.line("sem.wait sem{}, {}", kSemInput, full_epilogue_inputs());
  w_.line("saddi s{}, s{}, -1", block, block);
  const std::string odd = w_.new_label("last_odd"), end = w_.new_label("end");
  w_.line("sli s{}, 1", next);
  w_.line("sand s{}, s{}, s{}", next, block, next);
  w_.line("bne s{}, s0, {}", next, odd);
  final_drain(block, 0, vregs, masks);
  w_.line("jmp {}", end);
  w_.place(odd);
  final_drain(block, 1, vregs, masks);
  w_.place(end);
}

// Traps (#1) unless the launch's shape fits the program: 1 <= M <= spec.m (the rows VMEM was
// sized for), 1 <= N <= spec.n (its columns) and spec.k - D < K <= spec.k (its K slices: the
// K loops run spec.k / D slices, so K must reach the last one).
void MatmulBuilder::check_shape(int scratch0, int scratch1) {
  const std::string bad = w_.new_label("bad_shape");
  const auto within = [&](int arg, int64_t low, int64_t high) {  // low < value <= high
    w_.line("sarg s{}, {}", scratch0, arg);
    w_.load_immediate(scratch1, high);
    w_.line("blt s{}, s{}, {}", scratch1, scratch0, bad);
    w_.load_immediate(scratch1, low);
    w_.line("bge s{}, s{}, {}", scratch1, scratch0, bad);
  };
  within(m_arg_, 0, spec_.m);
  within(n_arg_, 0, spec_.n);
  within(k_arg_, k_pad_ - d_, spec_.k);
  w_.cold([&] {
    w_.place(bad);
    w_.trap(TrapCode::ShapeOutsideProgram);
  });
}

}  // namespace vtpu::kernels::matmul_detail
