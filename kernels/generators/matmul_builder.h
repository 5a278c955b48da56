// Schedule (each TensorCore runs it on its share of the rows or columns, see take_core_share):
//  - Output blocks of BM rows x BN = (MXUs used) x D columns, enumerated batch-major, then by
//    column block nb, then row block mb, so a B panel (all of K x BN) is prepared once per nb.
//  - Each MXU owns D columns of the block; accumulator slot r holds rows 8r..8r+7. The block body
//    is emitted twice: even blocks use slots [0, BM/8), odd blocks the next BM/8, so a block's
//    drain never holds up the next block's first matmuls.
//  - Inputs stream one block ahead on dq0, one DMA per K slice of A and of B, consumed by waits
//    in the same order inside the K loop (A's on sem0, B's on sem6). A stays resident in VMEM
//    when it fits (it is then read from HBM once); otherwise its panel is double-buffered per
//    block. With one batch entry and two row blocks or more, the next B panel is not left to the
//    pass's last block: its pieces are spread over the pass's other blocks on dq2
//    (issue_next_panel_piece), so they stream beside the pass's own traffic, not after it.
//  - With A resident, the first column pass also reads all of A and the next B panel, the later
//    passes only their C write-backs (and the next panel). When the traffic estimate says the
//    first two passes get shorter (deferral_pays), the first pass's C tiles stay in VMEM, one per
//    row block, and each is written back during the second pass, beside that pass's own.
//  - f32 B (transposed or not) lands in a staging area and the VPU writes the bf16 weight parts
//    (transposing 128x128 blocks through vtrans) into the panel the MXUs load from. bf16 B given
//    transposed lands in the panel as it lies and is loaded by mxu.lw.t (weights_transposed_).
//  - Transposed A ([K, M]) lands in a staging area too, a K slice at a time, and each slice is
//    transposed (vtrans on 128x128 blocks) into the usual A panel when the block reaches it.
//    Staging rows past K in a ragged last slice are never written, so they stay zero like the
//    padding above. Such an A is never kept resident.
//  - Padding rows/columns of A and B are never written, so they stay zero (VMEM starts zeroed):
//    ragged K adds nothing, ragged M and N compute values that are never written back.
//  - M is a runtime scalar (the last argument): VMEM is sized for spec.m rows, and the row-block
//    count, ragged extents and batch strides are computed from the M passed at launch, so one
//    program serves every M up to spec.m (a Linear layer at any sequence length). A larger M
//    traps (#1) instead of overrunning the VMEM sized for spec.m.
//
// The builder is one class whose parts live in matmul_dma.cc, matmul_operands.cc, matmul_drain.cc
// and matmul_compute.cc; its schedule (block shapes, VMEM layout) is the MatmulSchedule it
// derives from (matmul_schedule.h). Internal to kernels/generators: include matmul.h instead.
#pragma once

#include <string>

#include "kernels/codegen/asm_writer.h"
#include "kernels/generators/matmul_schedule.h"

namespace vtpu::kernels::matmul_detail {

inline constexpr int kSemInput = 0, kSemOutput = 2, kSemPrologue = 4, kSemDeferred = 5, kSemPanel = 6;

class MatmulBuilder : private MatmulSchedule {
 public:
  MatmulBuilder(const MatmulSpec& spec, const sim::ChipConfig& chip, bool overlap_passes);

  isa::Program build();

 private:
  // dst = ceil(M / BM), the row blocks of the launch's M; clobbers s`scratch`.
  void row_blocks(int dst, int scratch);

  // (bt, nb, mb) of the flat block index in `block`.
  void decode(int block, int bt, int nb, int mb);

  // dst = ceil(N / BN), the column blocks of the launch's N.
  void column_blocks(int dst);

  // dst = the launch's N (or K) times `factor` bytes: an HBM row pitch.
  void pitch(int dst, int arg, int64_t factor);
  // s`hb` += s`index` * (the launch's N or K) * factor, through s`scratch`.
  void add_pitched(int hb, int index, int arg, int64_t factor, int scratch);

  // Panels alternate between two buffers in the order they are used: (bt * NB + nb) & 1.
  void panel_parity(int dst, int bt, int nb, int scratch);

  // dst = the valid K of K slice s`kt` (D, or less in a ragged last slice); clobbers s`scratch`.
  void slice_depth(int dst, int kt, int scratch);

  // dst = min(cap, total - start): the valid extent of a ragged block along the dim whose launch
  // size is argument `arg` (M, N or K).
  void extent(int dst, int start, int arg, int64_t cap);
  void row_extent(int dst, int start, int64_t cap) { extent(dst, start, m_arg_, cap); }
  void clip(int dst, int start, int total, int64_t cap);

  // s`hb` += bt * M * (row elements) * eb: batch entry bt's [M, *] matrix, rows as long as the
  // launch's N or K (`row_arg`). M, N and K are the launch's; batch 1 has no offset.
  void add_batch_offset(int hb, int bt, int row_arg, int eb, int scratch);

  // A DMA whose HBM rows are the launch's N or K (`pitch_arg`) elements of `eb` bytes apart, on
  // queue `queue` (inputs dq0, outputs dq1 unless given).
  void dma(bool to_vmem, int sem, int vm, int hb, int rows, int row_bytes, int64_t vstride, int pitch_arg, int eb,
           int queue = -1);

  // Branches to `skip` unless A's panel for this block must be loaded (always, unless resident
  // and already loaded by the first column block).
  void skip_unless_a_needed(int nb, const std::string& skip);

  // The registers describing one block: its coordinates and valid extent.
  struct BlockRegs {
    int bt, nb, mb, row0, col0, rows, cols;
  };

  BlockRegs open_block(int block);

  void close_block(const BlockRegs& b);

  // B's piece for K slice s`kt` (s`kd` valid rows) of block `b`'s panel, on queue `queue` and
  // sem6; s`vm`, s`hb` and s`t` are scratch.
  void issue_b_piece(const BlockRegs& b, int kt, int kd, int queue, int vm, int hb, int t);

  // Issues K slice s`kt` of block `b`'s inputs: B's piece (with the first row block of a panel,
  // unless the pass before issued it ahead), then A's piece (unless resident and loaded).
  // B goes first because the weight load is the longer step before the first matmul. Waits in
  // the K loop consume them in this order.
  void issue_slice(const BlockRegs& b, int kt, int parity);

  // Full epilogue operands: block `b`'s [rows, cols] tile, after all its K slices.
  void issue_epilogue_tiles(const BlockRegs& b, int parity);

  // Block 0's inputs, before the loop; later blocks are issued one slice at a time from inside
  // the previous block's K loop, where the MXU queues hide the scalar work.
  void issue_first_block(int block);

  // Row, Column and Scalar epilogue operands are loaded once, before the first block.
  void load_broadcast_operands(RegisterPool& vregs);

  // Writes the stored weight parts of `x` (f32 in a vreg) to VMEM at s`addr` + offset (+
  // part_bytes per part), rows `stride` apart (see matmul_operands.cc).
  void store_parts(int x, int addr, int64_t offset, int64_t stride, RegisterPool& vregs, RegisterPool& masks, int zero);

  // Converts slice kt of the staged B panel into the stored weight parts. `panel` and `staging`
  // hold this nb's buffers; v`zero` holds 0 (with finite_passes_).
  void convert_slice(int kt, int panel, int staging, RegisterPool& vregs, RegisterPool& masks, int zero);

  // Slice kt of the staged A^T [Kpad, BM] (this block's, of `parity`) into the A panel [BM, Kpad]
  // at s`a_base`: 128x128 blocks through vtrans.
  void transpose_a_slice(int kt, int a_base, int parity, RegisterPool& vregs);

  // The LHS part the pass (A part, B part) multiplies, of 8 x D rows, into the group starting at
  // `g`: from the A panel at s`addr` in the leading pass, from the rows' finite form at s`addr`
  // in the others (see matmul_operands.cc).
  void load_lhs(int g, int addr, std::pair<int, int> pass, RegisterPool& vregs);

  // The finite form of the LHS rows in group g.. (just pushed by the leading pass) to s`addr`,
  // for the slice's other passes; v`zero` holds 0.
  void store_finite_lhs(int g, int addr, RegisterPool& vregs, RegisterPool& masks, int zero);

  // Registers of a block being drained: its coordinates, the C row cursor and the epilogue
  // operand cursors.
  struct Drain {
    int parity = 0;
    int bt = -1, nb = -1, mb = -1, tile = -1, crow = -1, scratch = -1, acc = -1;
    int slot0 = 0;
  };

  // Waits for what draining block s`block` (of `parity`) needs, and sets up its cursors.
  Drain begin_drain(int block, int parity, RegisterPool& vregs);

  int full_epilogue_inputs() const;

  // Pops accumulator row tile `rt` of every MXU, applies the epilogue and stores it to C in VMEM.
  void drain_row(Drain& d, int rt, RegisterPool& vregs, RegisterPool& masks);

  // dst = the VMEM address of block s`block`'s C tile: its own deferred tile (row block s`mb`) when
  // the block is deferred, else the shared one of its parity.
  void c_tile(int dst, int block, int mb, int parity);

  // Writes rows [first, first + count) of the drained C tile at s`tile` (tile < 0: the shared
  // tile of `parity`) back to HBM, clipped to the valid rows, signalling `sem`. When none are
  // valid nothing is issued, but with `always_signal` the semaphore is signalled anyway, so
  // whoever waits for the block's parts counts them all.
  void write_back(int bt, int nb, int mb, int parity, int tile, int sem, int64_t first, int64_t count, bool always_signal);

  // The deferred tiles are written back from block D - lead on, one per block, the tile of row
  // block block - (D - lead) (drained at least a block before): the first pass's last blocks,
  // past the next panel's pieces, have HBM to spare for `lead` of them. lead = min(kLead, D - 1).
  static constexpr int kDeferredLead = 1;
  void write_back_deferred(int block);

  void release_drain(Drain& d, RegisterPool& vregs);

  // Everything a block's compute needs in registers.
  struct Compute {
    int block, next, nblocks, parity;
    int bt, nb, mb, a_base, panel, staging, kt;
  };

  // Single-pass kernels with B in bf16 as given load each slice's weights into the MXUs' back
  // buffers during the slice before (mxu.lwb) and switch at the slice boundary (mxu.swap): a
  // weight load (256 cycles on a 256-wide MXU) is as long as a slice, more than the unit queues
  // run ahead, so loading at the boundary left the MXUs idle. Staged B and multi-pass kernels
  // switch weights inside a slice and load at the boundary.
  bool pipelined() const { return pairs_.size() == 1 && !staged_; }

  // Loads slice kt + 1's weights into the back buffers, when this block reads its B panel from
  // HBM (`streaming`, waiting for the piece first) or when it does not. On the last slice, the
  // non-streaming call loads the next block's slice 0 instead when that block reads the same
  // panel (it is not a panel's first row block), so block boundaries swap too; a next block that
  // starts a panel waits for its piece and loads its own. Uses s`scratch` (free between matmul
  // rows).
  void emit_next_weights(const Compute& c, int scratch, bool streaming);

  // A block is drained over the first two K slices of the next (one when K has a single slice),
  // written back after each: spread out, the drain's pops and stores never hold up the front end
  // long enough to delay the next slice's weight load.
  int drain_parts() const { return kt_ >= 2 ? 2 : 1; }

  // Waits for slice s`c.kt`'s B and A pieces (see matmul_compute.cc).
  void wait_for_slice(const Compute& c, const std::string& have_a, const std::string& have_b, int t, RegisterPool& vregs,
                      RegisterPool& masks, int zero);

  // Loads stored weight part `part` (weight_part) of slice s`c.kt` into every MXU (into the back
  // buffers only, when `back_buffer`).
  void load_weight_part(const Compute& c, int part, int wt, int t, bool back_buffer);

  // Loads every MXU's weights from the slice whose MXU-0 weights start at s`addr` (moved on by
  // the loads), into the back buffers (mxu.lwb) or the active ones (mxu.lw); the transposed
  // forms when weights_transposed_.
  void load_weights_from(int addr, bool back_buffer);

  // One K slice: wait for its pieces (converting B's if staged), load the weights, issue the same
  // slice of the next block and stream the LHS rows. With `drain`, accumulator row tiles
  // [drain_first, drain_end) of the previous block are popped between this slice's first matmul
  // rows (their slots were filled long before), so the MXUs never idle while a block drains.
  void emit_slice(const Compute& c, Drain* drain, RegisterPool& vregs, RegisterPool& masks, int64_t drain_first = 0,
                  int64_t drain_end = 0);

  // The next column block's B panel, spread over the pass: its KT pieces go out at every
  // (R - 1)th of the K slices of row blocks 1 .. R - 1 (R row blocks), on dq2, so they share HBM
  // with the pass's own traffic instead of queueing in front of it (HBM serves DMAs in issue
  // order) or after it. The panel's buffer was last read by the pass before, a block ago.
  void issue_next_panel_piece(const Compute& c);

  void compute_block(int block, int next, int nblocks, int parity, RegisterPool& vregs, RegisterPool& masks);

  void emit();

  // Drains the last block, each 8-row tile written back as soon as it is drained: the write-back
  // of the last block's C cannot hide behind anything, so it starts as early as it can.
  void final_drain(int block, int parity, RegisterPool& vregs, RegisterPool& masks);

  // Traps (#1) unless the launch's shape fits the program: 1 <= M <= spec.m (the rows VMEM was
  // sized for), 1 <= N <= spec.n (its columns) and spec.k - D < K <= spec.k (its K slices: the
  // K loops run spec.k / D slices, so K must reach the last one).
  void check_shape(int scratch0, int scratch1);

  // Narrows the launch's matmul to this TensorCore's share (contiguous): its rows (8-row units)
  // when M >= N, else its columns (D-column units) when N has one per core. M or N becomes the
  // core's count and the operands indexed by it start at the share's first row or column, so
  // the rest of the program is the one-core kernel on a smaller matmul. The launch's M and N
  // stay in scratch slots for the strides they give. A core with an empty share halts.
  void take_core_share();

  AsmWriter w_;
  int a_arg_ = 0, b_arg_ = 0, c_arg_ = 0, m_arg_ = 0, n_arg_ = 0, k_arg_ = 0;
  // The launch's M and N where they are strides (batch entries, rows of A^T, B, C and Full
  // epilogue operands): a core's share narrows m_arg_ or n_arg_, never these.
  int m_pitch_arg_ = 0, n_pitch_arg_ = 0;
  int row_blocks_ = -1;  // the scalar register holding ceil(M / BM)
  int deferred_blocks_ = -1;  // with defer_: the scalar register holding D, the deferred blocks
};

}  // namespace vtpu::kernels::matmul_detail
