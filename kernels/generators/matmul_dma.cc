// The matmul's HBM side: block coordinates and extents decoded from the launch's M, N and K,
// and the DMAs that bring A, B and the epilogue operands into VMEM one block ahead (see
// matmul_builder.h for the schedule).
#include "kernels/generators/matmul_builder.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "kernels/codegen/bf16_parts.h"
#include "kernels/codegen/block_stream.h"
#include "kernels/codegen/tile_codegen.h"
#include "kernels/codegen/vreg_shape.h"

namespace vtpu::kernels::matmul_detail {

// dst = ceil(M / BM), the row blocks of the launch's M; clobbers s`scratch`.
void MatmulBuilder::row_blocks(int dst, int scratch) {
  w_.ceil_div_argument(dst, m_arg_, bm_, scratch);
}

// (bt, nb, mb) of the flat block index in `block`.
void MatmulBuilder::decode(int block, int bt, int nb, int mb) {
  auto& r = w_.sregs();
  const int t = r.take();
  w_.line("srem s{}, s{}, s{}", mb, block, row_blocks_);
  w_.line("sdiv s{}, s{}, s{}", bt, block, row_blocks_);
  column_blocks(t);
  w_.line("srem s{}, s{}, s{}", nb, bt, t);
  w_.line("sdiv s{}, s{}, s{}", bt, bt, t);
  r.release(t);
}

// dst = ceil(N / BN), the column blocks of the launch's N.
void MatmulBuilder::column_blocks(int dst) {
  const int t = w_.sregs().take();
  w_.ceil_div_argument(dst, n_arg_, bn_, t);
  w_.sregs().release(t);
}

// dst = the launch's N (or K) times `factor` bytes: an HBM row pitch.
void MatmulBuilder::pitch(int dst, int arg, int64_t factor) {
  w_.line("sarg s{}, {}", dst, arg);
  w_.line("smuli s{}, s{}, {}", dst, dst, factor);
}

// s`hb` += s`index` * (the launch's N or K) * factor, through s`scratch`.
void MatmulBuilder::add_pitched(int hb, int index, int arg, int64_t factor, int scratch) {
  pitch(scratch, arg, factor);
  w_.line("smul s{}, s{}, s{}", scratch, scratch, index);
  w_.line("sadd s{}, s{}, s{}", hb, hb, scratch);
}

// Panels alternate between two buffers in the order they are used: (bt * NB + nb) & 1.
void MatmulBuilder::panel_parity(int dst, int bt, int nb, int scratch) {
  column_blocks(scratch);
  w_.line("smul s{}, s{}, s{}", dst, bt, scratch);
  w_.line("sadd s{}, s{}, s{}", dst, dst, nb);
  w_.line("sli s{}, 1", scratch);
  w_.line("sand s{}, s{}, s{}", dst, dst, scratch);
}

// dst = the valid K of K slice s`kt` (D, or less in a ragged last slice); clobbers s`scratch`.
void MatmulBuilder::slice_depth(int dst, int kt, int scratch) {
  w_.line("smuli s{}, s{}, {}", scratch, kt, d_);
  extent(dst, scratch, k_arg_, d_);
}

// dst = min(cap, total - start): the valid extent of a ragged block along the dim whose launch
// size is argument `arg` (M, N or K).
void MatmulBuilder::extent(int dst, int start, int arg, int64_t cap) {
  const int t = w_.sregs().take();
  w_.line("sarg s{}, {}", t, arg);
  clip(dst, start, t, cap);
  w_.sregs().release(t);
}

void MatmulBuilder::clip(int dst, int start, int total, int64_t cap) {
  w_.line("ssub s{}, s{}, s{}", dst, total, start);
  w_.load_immediate(total, cap);
  w_.line("smin s{}, s{}, s{}", dst, dst, total);
}

// s`hb` += bt * M * (row elements) * eb: batch entry bt's [M, *] matrix, rows as long as the
// launch's N or K (`row_arg`). M (the launch's, not the core's share), N and K are the launch's;
// batch 1 has no offset.
void MatmulBuilder::add_batch_offset(int hb, int bt, int row_arg, int eb, int scratch) {
  if (spec_.batch == 1) return;
  const int t = w_.sregs().take();
  w_.line("sarg s{}, {}", scratch, m_pitch_arg_);
  w_.line("smul s{}, s{}, s{}", scratch, scratch, bt);
  pitch(t, row_arg, eb);
  w_.line("smul s{}, s{}, s{}", scratch, scratch, t);
  w_.line("sadd s{}, s{}, s{}", hb, hb, scratch);
  w_.sregs().release(t);
}

// A DMA whose HBM rows are the launch's N or K (`pitch_arg`) elements of `eb` bytes apart, on
// queue `queue` (inputs dq0, outputs dq1 unless given).
void MatmulBuilder::dma(bool to_vmem, int sem, int vm, int hb, int rows, int row_bytes, int64_t vstride, int pitch_arg, int eb, int queue) {
  auto& r = w_.sregs();
  const int vs = r.take(), hs = r.take();
  w_.load_immediate(vs, vstride);
  pitch(hs, pitch_arg, eb);
  w_.dma(to_vmem, queue >= 0 ? queue : to_vmem ? 0 : 1, sem,
         {.vmem = vm, .hbm = hb, .rows = rows, .row_bytes = row_bytes, .vmem_stride = vs, .hbm_stride = hs});
  r.release(vs);
  r.release(hs);
}

// Branches to `skip` unless A's panel for this block must be loaded (always, unless resident
// and already loaded by the first column block).
void MatmulBuilder::skip_unless_a_needed(int nb, const std::string& skip) {
  if (a_resident_) w_.line("bne s{}, s0, {}", nb, skip);
}

MatmulBuilder::BlockRegs MatmulBuilder::open_block(int block) {
  auto& r = w_.sregs();
  BlockRegs b{r.take(), r.take(), r.take(), r.take(), r.take(), r.take(), r.take()};
  decode(block, b.bt, b.nb, b.mb);
  w_.line("smuli s{}, s{}, {}", b.row0, b.mb, bm_);
  w_.line("smuli s{}, s{}, {}", b.col0, b.nb, bn_);
  row_extent(b.rows, b.row0, bm_);
  extent(b.cols, b.col0, n_arg_, bn_);
  return b;
}

void MatmulBuilder::close_block(const BlockRegs& b) {
  for (int x : {b.bt, b.nb, b.mb, b.row0, b.col0, b.rows, b.cols}) w_.sregs().release(x);
}

// B's piece for K slice s`kt` (s`kd` valid rows) of block `b`'s panel, on queue `queue` and
// sem6; s`vm`, s`hb` and s`t` are scratch.
void MatmulBuilder::issue_b_piece(const BlockRegs& b, int kt, int kd, int queue, int vm, int hb, int t) {
  w_.line("sarg s{}, {}", hb, b_arg_);
  if (!spec_.b_shared) {  // batch entry bt's B: bt * K * N elements in (vm is free until below)
    pitch(t, k_arg_, eb_b_);
    w_.line("sarg s{}, {}", vm, n_pitch_arg_);
    w_.line("smul s{}, s{}, s{}", t, t, vm);
    w_.line("smul s{}, s{}, s{}", t, t, b.bt);
    w_.line("sadd s{}, s{}, s{}", hb, hb, t);
  }
  panel_parity(vm, b.bt, b.nb, t);
  const uint64_t dst_base = staged_ ? staging_vmem_ : panel_vmem_;
  const uint64_t dst_stride = staged_ ? staging_bytes_ : b_stored_parts_ * part_bytes_;
  w_.line("smuli s{}, s{}, {}", vm, vm, int64_t(dst_stride));
  w_.line("saddi s{}, s{}, {}", vm, vm, dst_base);
  if (spec_.b_transposed) {  // rows n of B^T [N, K], columns kt*D .. of each
    w_.add_scaled(vm, kt, d_ * eb_b_, t);
    w_.line("sadd s{}, s{}, s{}", hb, hb, t);
    add_pitched(hb, b.col0, k_arg_, eb_b_, t);
    w_.line("smuli s{}, s{}, {}", t, kd, eb_b_);
    dma(true, kSemPanel, vm, hb, b.cols, t, k_pad_ * eb_b_, k_arg_, eb_b_, queue);
  } else {  // rows kt*D .. of B [K, N], columns col0 ..
    w_.add_scaled(vm, kt, d_ * bn_ * eb_b_, t);
    add_pitched(hb, kt, n_pitch_arg_, d_ * eb_b_, t);
    w_.add_scaled(hb, b.col0, eb_b_, t);
    w_.line("smuli s{}, s{}, {}", t, b.cols, eb_b_);
    dma(true, kSemPanel, vm, hb, kd, t, bn_ * eb_b_, n_pitch_arg_, eb_b_, queue);
  }
}

// Issues K slice s`kt` of block `b`'s inputs: B's piece (with the first row block of a panel,
// unless the pass before issued it ahead), then A's piece (unless resident and loaded).
// B goes first because the weight load is the longer step before the first matmul. Waits in
// the K loop consume them in this order.
void MatmulBuilder::issue_slice(const BlockRegs& b, int kt, int parity) {
  auto& r = w_.sregs();
  const int kd = r.take(), vm = r.take(), hb = r.take(), t = r.take();
  const std::string skip_a = w_.new_label("issue_skip_a"), skip_b = w_.new_label("issue_skip_b");
  slice_depth(kd, kt, t);
  w_.line("bne s{}, s0, {}", b.mb, skip_b);
  if (panels_ahead_) {  // issued during the pass before (issue_next_panel_piece) when it had 2+ row blocks
    const std::string own = w_.new_label("own_panel");
    w_.line("beq s{}, s0, {}", b.nb, own);
    w_.line("sli s{}, 2", t);
    w_.line("bge s{}, s{}, {}", row_blocks_, t, skip_b);
    w_.place(own);
  }
  issue_b_piece(b, kt, kd, 0, vm, hb, t);
  w_.place(skip_b);
  // A[bt, row0 .., kt*D ..] -> the A panel
  skip_unless_a_needed(b.nb, skip_a);
  if (a_resident_) {
    w_.line("smuli s{}, s{}, {}", vm, b.mb, int64_t(a_panel_bytes_));
    w_.line("saddi s{}, s{}, {}", vm, vm, a_vmem_[0]);
  } else {
    w_.load_immediate(vm, a_vmem_[parity]);
  }
  if (spec_.a_transposed) {  // rows kt*D .. of A^T [K, M] (kd of them), the block's columns row0 ..
    w_.load_immediate(vm, a_staging_[parity]);
    w_.add_scaled(vm, kt, d_ * a_stage_pitch_, t);
    w_.line("sarg s{}, {}", hb, a_arg_);
    add_batch_offset(hb, b.bt, k_arg_, eb_a_, t);
    add_pitched(hb, kt, m_pitch_arg_, d_ * eb_a_, t);
    w_.add_scaled(hb, b.row0, eb_a_, t);
    w_.line("smuli s{}, s{}, {}", t, b.rows, eb_a_);
    dma(true, kSemInput, vm, hb, kd, t, a_stage_pitch_, m_pitch_arg_, eb_a_);
  } else {
    w_.add_scaled(vm, kt, d_ * eb_a_, t);
    w_.line("sarg s{}, {}", hb, a_arg_);
    w_.line("sadd s{}, s{}, s{}", hb, hb, t);
    add_batch_offset(hb, b.bt, k_arg_, eb_a_, t);
    add_pitched(hb, b.row0, k_arg_, eb_a_, t);
    w_.line("smuli s{}, s{}, {}", t, kd, eb_a_);
    dma(true, kSemInput, vm, hb, b.rows, t, k_pad_ * eb_a_, k_arg_, eb_a_);
  }
  w_.place(skip_a);
  for (int x : {kd, vm, hb, t}) r.release(x);
}

// Full epilogue operands: block `b`'s [rows, cols] tile, after all its K slices.
void MatmulBuilder::issue_epilogue_tiles(const BlockRegs& b, int parity) {
  auto& r = w_.sregs();
  const int vm = r.take(), hb = r.take(), t = r.take();
  for (const auto& e : epilogue_) {
    if (e.operand.layout != Layout::Full) continue;
    w_.load_immediate(vm, e.vmem[parity]);
    w_.line("sarg s{}, {}", hb, e.arg);
    add_batch_offset(hb, b.bt, n_pitch_arg_, e.eb, t);
    add_pitched(hb, b.row0, n_pitch_arg_, e.eb, t);
    w_.add_scaled(hb, b.col0, e.eb, t);
    w_.line("smuli s{}, s{}, {}", t, b.cols, e.eb);
    dma(true, kSemInput, vm, hb, b.rows, t, bn_ * e.eb, n_pitch_arg_, e.eb);
  }
  for (int x : {vm, hb, t}) r.release(x);
}

// Block 0's inputs, before the loop; later blocks are issued one slice at a time from inside
// the previous block's K loop, where the MXU queues hide the scalar work.
void MatmulBuilder::issue_first_block(int block) {
  auto& r = w_.sregs();
  const BlockRegs b = open_block(block);
  const int kt = r.take(), nkt = r.take();
  const std::string loop = w_.new_label("issue_k");
  w_.load_immediate(nkt, kt_);
  w_.line("sli s{}, 0", kt);
  w_.place(loop);
  issue_slice(b, kt, 0);
  w_.line("saddi s{}, s{}, 1", kt, kt);
  w_.line("blt s{}, s{}, {}", kt, nkt, loop);
  issue_epilogue_tiles(b, 0);
  r.release(kt);
  r.release(nkt);
  close_block(b);
}

// The next column block's B panel, spread over the pass: its KT pieces go out at every
// (R - 1)th of the K slices of row blocks 1 .. R - 1 (R row blocks), on dq2, so they share HBM
// with the pass's own traffic instead of queueing in front of it (HBM serves DMAs in issue
// order) or after it. The panel's buffer was last read by the pass before, a block ago.
void MatmulBuilder::issue_next_panel_piece(const Compute& c) {
  auto& r = w_.sregs();
  const std::string skip = w_.new_label("no_panel_piece");
  const int piece = r.take(), t = r.take(), col0 = r.take();
  w_.line("beq s{}, s0, {}", c.mb, skip);  // (so R >= 2)
  column_blocks(t);
  w_.line("saddi s{}, s{}, -1", t, t);
  w_.line("bge s{}, s{}, {}", c.nb, t, skip);  // the last column block has no next panel
  w_.line("saddi s{}, s{}, -1", piece, c.mb);  // the slot, (mb - 1) * KT + kt
  w_.line("smuli s{}, s{}, {}", piece, piece, kt_);
  w_.line("sadd s{}, s{}, s{}", piece, piece, c.kt);
  w_.line("saddi s{}, s{}, -1", t, row_blocks_);
  w_.line("srem s{}, s{}, s{}", col0, piece, t);
  w_.line("bne s{}, s0, {}", col0, skip);
  w_.line("sdiv s{}, s{}, s{}", piece, piece, t);  // the piece, slot / (R - 1)
  w_.load_immediate(t, kt_);
  w_.line("bge s{}, s{}, {}", piece, t, skip);
  // the next panel's block coordinates, as issue_b_piece reads them (batch entry 0)
  BlockRegs b{0, t, -1, -1, col0, -1, r.take()};  // bt, nb, mb, row0, col0, rows, cols
  w_.line("saddi s{}, s{}, 1", b.nb, c.nb);
  w_.line("smuli s{}, s{}, {}", b.col0, b.nb, bn_);
  extent(b.cols, b.col0, n_arg_, bn_);
  const int kd = r.take(), vm = r.take(), hb = r.take(), u = r.take();
  slice_depth(kd, piece, u);
  issue_b_piece(b, piece, kd, 2, vm, hb, u);
  for (int x : {piece, t, col0, b.cols, kd, vm, hb, u}) r.release(x);
  w_.place(skip);
}

}  // namespace vtpu::kernels::matmul_detail
