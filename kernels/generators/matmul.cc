// Schedule (one TensorCore):
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
//  - f32 or transposed B lands in a staging area and the VPU writes the bf16 weight parts
//    (transposing 128x128 blocks through vtrans) into the panel the MXUs load from.
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
#include "kernels/generators/matmul.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "kernels/codegen/asm_writer.h"
#include "kernels/codegen/tile_codegen.h"
#include "kernels/codegen/bf16_parts.h"
#include "kernels/codegen/block_stream.h"
#include "kernels/codegen/vreg_shape.h"

namespace vtpu::kernels {
namespace {

constexpr int kSemInput = 0, kSemOutput = 2, kSemPrologue = 4, kSemDeferred = 5, kSemPanel = 6;

struct EpilogueBuffer {
  Operand operand;
  int eb = 4;
  int arg = 0;
  uint64_t vmem[2] = {0, 0};
  int preset_vreg = -1;
  int cursor = -1;  // scalar register while draining
};

class MatmulBuilder {
 public:
  // `overlap_passes`: the schedule may issue the next B panel across a pass and defer the first
  // pass's write-backs (more scalar registers held).
  MatmulBuilder(const MatmulSpec& spec, const sim::ChipConfig& chip, bool overlap_passes)
      : spec_(spec), chip_(chip), w_("matmul"), overlap_passes_(overlap_passes) {}

  isa::Program build() {
    validate();
    plan();
    emit();
    w_.target_mxu(chip_.mxu_dim);
    return w_.assemble();
  }

 private:
  void validate() {
    const auto& s = spec_;
    if (s.batch < 1 || s.m < 1 || s.n < 1 || s.k < 1) throw KernelError("matmul: every dimension must be at least 1");
    for (DType t : {s.a_dtype, s.b_dtype}) {
      if (t != DType::F32 && t != DType::BF16) {
        throw KernelError(fmt::format("matmul: {} operands are not supported (f32 or bf16)", dtype_name(t)));
      }
    }
    if (s.out_dtype != DType::F32 && s.out_dtype != DType::BF16) throw KernelError("matmul: the output is f32 or bf16");
    if (s.epilogue && s.epilogue->outputs().size() != 1) throw KernelError("matmul: the epilogue has exactly one output");
    if (s.epilogue && s.epilogue->operand_count() > 1 + static_cast<int>(s.epilogue_inputs.size())) {
      throw KernelError("matmul: the epilogue reads an operand that has no input");
    }
    for (const auto& o : s.epilogue_inputs) {
      if (!dtype_on_chip(o.dtype)) throw KernelError(fmt::format("matmul: {} epilogue input not supported", dtype_name(o.dtype)));
    }
    if (s.batch * s.m * std::max(s.n, s.k) >= (int64_t{1} << 31) || s.batch * s.k * s.n >= (int64_t{1} << 31)) {
      throw KernelError("matmul: operands too large for one launch");
    }
    pairs_ = mxu_pass_pairs(s.passes);
  }

  void plan() {
    const auto& s = spec_;
    d_ = chip_.mxu_dim;
    group_ = d_ / kLanes;
    bn_ = std::min<int64_t>(int64_t{chip_.mxu_per_core} * d_, round_up(s.n, d_));
    mxus_ = static_cast<int>(bn_ / d_);
    bm_ = std::min<int64_t>({256, round_up(s.m, kSublanes), int64_t{chip_.mxu_acc_slots} / 2 * kSublanes});
    k_pad_ = round_up(s.k, d_);
    kt_ = k_pad_ / d_;
    eb_a_ = dtype_bytes(s.a_dtype);
    eb_b_ = dtype_bytes(s.b_dtype);
    eb_c_ = dtype_bytes(s.out_dtype);
    a_parts_ = bf16_part_count(s.a_dtype, s.passes);
    b_parts_ = bf16_part_count(s.b_dtype, s.passes);
    std::erase_if(pairs_, [&](auto p) { return p.first >= a_parts_ || p.second >= b_parts_; });
    // Passes grouped by B part: a K slice then loads each weight part once (3 loads, not 6, at
    // 'highest'), and a weight load costs more than a small block's matmul rows. The f32
    // accumulator sums the same terms, in another order.
    std::stable_sort(pairs_.begin(), pairs_.end(), [](auto x, auto y) { return x.second < y.second; });
    staged_ = s.b_dtype != DType::BF16 || s.b_transposed;
    panels_ahead_ = overlap_passes_ && s.batch == 1 && s.n > bn_ && chip_.dma_queues >= 3;  // a second column block, a third queue

    uint64_t next = 0;
    const auto place = [&](uint64_t bytes) {
      const uint64_t at = next;
      next += round_up(static_cast<int64_t>(bytes), 512);
      return at;
    };
    const uint64_t vmem = chip_.kernel_vmem_bytes();
    const uint64_t a_all = uint64_t(round_up(s.m, bm_)) * k_pad_ * eb_a_;
    a_resident_ = s.batch == 1 && a_all <= vmem / 3 && !s.a_transposed;
    a_panel_bytes_ = uint64_t(bm_) * k_pad_ * eb_a_;
    a_vmem_[0] = place(a_resident_ ? a_all : a_panel_bytes_);
    a_vmem_[1] = a_resident_ ? a_vmem_[0] : place(a_panel_bytes_);
    part_bytes_ = uint64_t(k_pad_) * bn_ * 2;
    panel_vmem_ = place(2 * b_parts_ * part_bytes_);
    staging_bytes_ = s.b_transposed ? uint64_t(bn_) * k_pad_ * eb_b_ : uint64_t(k_pad_) * bn_ * eb_b_;
    if (staged_) staging_vmem_ = place(2 * staging_bytes_);
    if (s.a_transposed) {  // a block's A^T, [Kpad, BM rounded up to whole 128-lane blocks], per parity
      a_stage_pitch_ = round_up(bm_, kLanes) * eb_a_;
      for (auto& at : a_staging_) at = place(uint64_t(k_pad_) * a_stage_pitch_);
    }
    c_tile_bytes_ = uint64_t(bm_) * bn_ * eb_c_;
    c_vmem_[0] = place(c_tile_bytes_);
    c_vmem_[1] = place(c_tile_bytes_);
    a_arg_ = w_.argument("a", isa::ArgumentKind::Buffer);
    b_arg_ = w_.argument("b", isa::ArgumentKind::Buffer);
    for (size_t i = 0; i < s.epilogue_inputs.size(); ++i) {
      EpilogueBuffer e;
      e.operand = s.epilogue_inputs[i];
      e.eb = dtype_bytes(e.operand.dtype);
      e.arg = w_.argument(fmt::format("epilogue{}", i), isa::ArgumentKind::Buffer);
      const uint64_t pad = uint64_t(kLanes) * e.eb;
      switch (e.operand.layout) {
        case Layout::Full: e.vmem[0] = place(uint64_t(bm_) * bn_ * e.eb); e.vmem[1] = place(uint64_t(bm_) * bn_ * e.eb); break;
        case Layout::Row: e.vmem[0] = e.vmem[1] = place(uint64_t(round_up(s.n, bn_)) * e.eb + pad); break;
        case Layout::Column: e.vmem[0] = e.vmem[1] = place(uint64_t(round_up(s.m, bm_)) * e.eb + pad); break;
        case Layout::Scalar: e.vmem[0] = e.vmem[1] = place(pad); break;
        case Layout::Periodic: throw KernelError("matmul: periodic epilogue operands are not supported (materialise them)");
      }
      epilogue_.push_back(e);
    }
    const uint64_t deferred_bytes = uint64_t(round_up(s.m, bm_) / bm_) * c_tile_bytes_;
    if (deferral_pays() && next + deferred_bytes <= vmem) {
      defer_ = true;
      c_deferred_vmem_ = place(deferred_bytes);
    }
    c_arg_ = w_.argument("c", isa::ArgumentKind::Buffer);
    m_arg_ = w_.argument("m", isa::ArgumentKind::Scalar);
    n_arg_ = w_.argument("n", isa::ArgumentKind::Scalar);
    k_arg_ = w_.argument("k", isa::ArgumentKind::Scalar);
    if (next > vmem) {
      throw KernelError(fmt::format("matmul {}x{}x{}: needs {} bytes of VMEM, {} has {}", s.m, s.n, s.k, next, chip_.name, vmem));
    }
  }

  // Whether deferring the first column pass's write-backs to the second shortens the two passes,
  // each estimated as the longer of its MXU cycles and its HBM traffic at full bandwidth (spec
  // M, N and K): the first pass reads A and two B panels, so its C write-backs are what makes it
  // memory-bound; the second then writes two passes' C.
  bool deferral_pays() const {
    const auto& s = spec_;
    if (!overlap_passes_ || !a_resident_ || s.batch != 1 || s.n <= bn_) return false;
    const double per_cycle = chip_.hbm_bandwidth_bytes_per_s / chip_.clock_hz;
    const double rows = double(round_up(s.m, bm_) / bm_);
    const double compute = rows * double(bm_ / kSublanes) * chip_.mxu_push_cycles * kt_ * pairs_.size();
    const double a = double(s.m) * s.k * eb_a_ / per_cycle, panel = double(s.k) * bn_ * eb_b_ / per_cycle;
    const double c = rows * double(c_tile_bytes_) / per_cycle;
    const double now = std::max(compute, a + 2 * panel + c) + std::max(compute, panel + c);
    const double deferred = std::max(compute, a + 2 * panel) + std::max(compute, panel + 2 * c);
    return deferred < now;
  }

  // dst = ceil(M / BM), the row blocks of the launch's M; clobbers s`scratch`.
  void row_blocks(int dst, int scratch) {
    w_.ceil_div_argument(dst, m_arg_, bm_, scratch);
  }

  // (bt, nb, mb) of the flat block index in `block`.
  void decode(int block, int bt, int nb, int mb) {
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
  void column_blocks(int dst) {
    const int t = w_.sregs().take();
    w_.ceil_div_argument(dst, n_arg_, bn_, t);
    w_.sregs().release(t);
  }

  // dst = the launch's N (or K) times `factor` bytes: an HBM row pitch.
  void pitch(int dst, int arg, int64_t factor) {
    w_.line("sarg s{}, {}", dst, arg);
    w_.line("smuli s{}, s{}, {}", dst, dst, factor);
  }
  // s`hb` += s`index` * (the launch's N or K) * factor, through s`scratch`.
  void add_pitched(int hb, int index, int arg, int64_t factor, int scratch) {
    pitch(scratch, arg, factor);
    w_.line("smul s{}, s{}, s{}", scratch, scratch, index);
    w_.line("sadd s{}, s{}, s{}", hb, hb, scratch);
  }

  // Panels alternate between two buffers in the order they are used: (bt * NB + nb) & 1.
  void panel_parity(int dst, int bt, int nb, int scratch) {
    column_blocks(scratch);
    w_.line("smul s{}, s{}, s{}", dst, bt, scratch);
    w_.line("sadd s{}, s{}, s{}", dst, dst, nb);
    w_.line("sli s{}, 1", scratch);
    w_.line("sand s{}, s{}, s{}", dst, dst, scratch);
  }

  // dst = the valid K of K slice s`kt` (D, or less in a ragged last slice); clobbers s`scratch`.
  void slice_depth(int dst, int kt, int scratch) {
    w_.line("smuli s{}, s{}, {}", scratch, kt, d_);
    extent(dst, scratch, k_arg_, d_);
  }

  // dst = min(cap, total - start): the valid extent of a ragged block along the dim whose launch
  // size is argument `arg` (M, N or K).
  void extent(int dst, int start, int arg, int64_t cap) {
    const int t = w_.sregs().take();
    w_.line("sarg s{}, {}", t, arg);
    clip(dst, start, t, cap);
    w_.sregs().release(t);
  }
  void row_extent(int dst, int start, int64_t cap) { extent(dst, start, m_arg_, cap); }
  void clip(int dst, int start, int total, int64_t cap) {
    w_.line("ssub s{}, s{}, s{}", dst, total, start);
    w_.load_immediate(total, cap);
    w_.line("smin s{}, s{}, s{}", dst, dst, total);
  }

  // s`hb` += bt * M * (row elements) * eb: batch entry bt's [M, *] matrix, rows as long as the
  // launch's N or K (`row_arg`). M, N and K are the launch's; batch 1 has no offset.
  void add_batch_offset(int hb, int bt, int row_arg, int eb, int scratch) {
    if (spec_.batch == 1) return;
    const int t = w_.sregs().take();
    w_.line("sarg s{}, {}", scratch, m_arg_);
    w_.line("smul s{}, s{}, s{}", scratch, scratch, bt);
    pitch(t, row_arg, eb);
    w_.line("smul s{}, s{}, s{}", scratch, scratch, t);
    w_.line("sadd s{}, s{}, s{}", hb, hb, scratch);
    w_.sregs().release(t);
  }

  // A DMA whose HBM rows are the launch's N or K (`pitch_arg`) elements of `eb` bytes apart, on
  // queue `queue` (inputs dq0, outputs dq1 unless given).
  void dma(bool to_vmem, int sem, int vm, int hb, int rows, int row_bytes, int64_t vstride, int pitch_arg, int eb,
           int queue = -1) {
    auto& r = w_.sregs();
    const int vs = r.take(), hs = r.take();
    w_.load_immediate(vs, vstride);
    pitch(hs, pitch_arg, eb);
    w_.line("{} dq{}, sem{}, s{}, s{}, s{}, s{}, s{}, s{}", to_vmem ? "dma.h2v" : "dma.v2h", queue >= 0 ? queue : to_vmem ? 0 : 1, sem, vm,
            hb, rows, row_bytes, vs, hs);
    r.release(vs);
    r.release(hs);
  }

  // Branches to `skip` unless A's panel for this block must be loaded (always, unless resident
  // and already loaded by the first column block).
  void skip_unless_a_needed(int nb, const std::string& skip) {
    if (a_resident_) w_.line("bne s{}, s0, {}", nb, skip);
  }

  // The registers describing one block: its coordinates and valid extent.
  struct BlockRegs {
    int bt, nb, mb, row0, col0, rows, cols;
  };

  BlockRegs open_block(int block) {
    auto& r = w_.sregs();
    BlockRegs b{r.take(), r.take(), r.take(), r.take(), r.take(), r.take(), r.take()};
    decode(block, b.bt, b.nb, b.mb);
    w_.line("smuli s{}, s{}, {}", b.row0, b.mb, bm_);
    w_.line("smuli s{}, s{}, {}", b.col0, b.nb, bn_);
    row_extent(b.rows, b.row0, bm_);
    extent(b.cols, b.col0, n_arg_, bn_);
    return b;
  }

  void close_block(const BlockRegs& b) {
    for (int x : {b.bt, b.nb, b.mb, b.row0, b.col0, b.rows, b.cols}) w_.sregs().release(x);
  }

  // B's piece for K slice s`kt` (s`kd` valid rows) of block `b`'s panel, on queue `queue` and
  // sem6; s`vm`, s`hb` and s`t` are scratch.
  void issue_b_piece(const BlockRegs& b, int kt, int kd, int queue, int vm, int hb, int t) {
    w_.line("sarg s{}, {}", hb, b_arg_);
    if (!spec_.b_shared) {  // batch entry bt's B: bt * K * N elements in (vm is free until below)
      pitch(t, k_arg_, eb_b_);
      w_.line("sarg s{}, {}", vm, n_arg_);
      w_.line("smul s{}, s{}, s{}", t, t, vm);
      w_.line("smul s{}, s{}, s{}", t, t, b.bt);
      w_.line("sadd s{}, s{}, s{}", hb, hb, t);
    }
    panel_parity(vm, b.bt, b.nb, t);
    const uint64_t dst_base = staged_ ? staging_vmem_ : panel_vmem_;
    const uint64_t dst_stride = staged_ ? staging_bytes_ : b_parts_ * part_bytes_;
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
      add_pitched(hb, kt, n_arg_, d_ * eb_b_, t);
      w_.add_scaled(hb, b.col0, eb_b_, t);
      w_.line("smuli s{}, s{}, {}", t, b.cols, eb_b_);
      dma(true, kSemPanel, vm, hb, kd, t, bn_ * eb_b_, n_arg_, eb_b_, queue);
    }
  }

  // Issues K slice s`kt` of block `b`'s inputs: B's piece (with the first row block of a panel,
  // unless the pass before issued it ahead), then A's piece (unless resident and loaded).
  // B goes first because the weight load is the longer step before the first matmul. Waits in
  // the K loop consume them in this order.
  void issue_slice(const BlockRegs& b, int kt, int parity) {
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
      add_pitched(hb, kt, m_arg_, d_ * eb_a_, t);
      w_.add_scaled(hb, b.row0, eb_a_, t);
      w_.line("smuli s{}, s{}, {}", t, b.rows, eb_a_);
      dma(true, kSemInput, vm, hb, kd, t, a_stage_pitch_, m_arg_, eb_a_);
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
  void issue_epilogue_tiles(const BlockRegs& b, int parity) {
    auto& r = w_.sregs();
    const int vm = r.take(), hb = r.take(), t = r.take();
    for (const auto& e : epilogue_) {
      if (e.operand.layout != Layout::Full) continue;
      w_.load_immediate(vm, e.vmem[parity]);
      w_.line("sarg s{}, {}", hb, e.arg);
      add_batch_offset(hb, b.bt, n_arg_, e.eb, t);
      add_pitched(hb, b.row0, n_arg_, e.eb, t);
      w_.add_scaled(hb, b.col0, e.eb, t);
      w_.line("smuli s{}, s{}, {}", t, b.cols, e.eb);
      dma(true, kSemInput, vm, hb, b.rows, t, bn_ * e.eb, n_arg_, e.eb);
    }
    for (int x : {vm, hb, t}) r.release(x);
  }

  // Block 0's inputs, before the loop; later blocks are issued one slice at a time from inside
  // the previous block's K loop, where the MXU queues hide the scalar work.
  void issue_first_block(int block) {
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

  // Row, Column and Scalar epilogue operands are loaded once, before the first block.
  void load_broadcast_operands(RegisterPool& vregs) {
    auto& r = w_.sregs();
    int pending = 0;
    for (auto& e : epilogue_) {
      if (e.operand.layout == Layout::Full) continue;
      const int vm = r.take(), hb = r.take(), one = r.take(), bytes = r.take();
      // the whole operand in one row: [N], [M] (N and M at launch, at most the capacity) or one element
      const int64_t capacity = e.operand.layout == Layout::Row ? spec_.n : e.operand.layout == Layout::Column ? spec_.m : 1;
      const int count_arg = e.operand.layout == Layout::Row ? n_arg_ : m_arg_;
      w_.load_immediate(vm, e.vmem[0]);
      w_.line("sarg s{}, {}", hb, e.arg);
      w_.load_immediate(one, 1);
      if (e.operand.layout == Layout::Scalar) {
        w_.load_immediate(bytes, e.eb);
      } else {
        pitch(bytes, count_arg, e.eb);
      }
      dma(true, kSemPrologue, vm, hb, one, bytes, capacity * e.eb, count_arg, e.eb);
      ++pending;
      for (int x : {vm, hb, one, bytes}) r.release(x);
    }
    if (pending) w_.line("sem.wait sem{}, {}", kSemPrologue, pending);
    for (auto& e : epilogue_) {
      if (e.operand.layout != Layout::Scalar) continue;
      const int vm = r.take();
      w_.load_immediate(vm, e.vmem[0]);
      e.preset_vreg = vregs.take();
      load_scalar_broadcast(w_, e.operand.dtype, e.preset_vreg, vm);
      r.release(vm);
    }
  }

  // Writes the bf16 parts of `x` (f32 in a vreg) to VMEM at s`addr` + offset (+ part_bytes per
  // part), rows `stride` apart. Part 0 is x rounded, part 1 the rounding error rounded, part 2
  // what is left after that.
  void store_parts(int x, int addr, int64_t offset, int64_t stride, RegisterPool& vregs) {
    const int rest = vregs.take();
    w_.line("vmov v{}, v{}", rest, x);
    store_bf16_parts(w_, vregs, rest, addr, offset, b_parts_, int64_t(part_bytes_), stride);
    vregs.release(rest);
  }

  // Converts slice kt of the staged B panel into the bf16 weight parts. `panel` and `staging` hold
  // this nb's buffers.
  void convert_slice(int kt, int panel, int staging, RegisterPool& vregs) {
    auto& r = w_.sregs();
    const int src = r.take(), dst = r.take(), t = r.take(), i = r.take(), n = r.take();
    const char* load = load_mnemonic(spec_.b_dtype);
    if (!spec_.b_transposed) {
      // rows kt*D .. +D of staging [Kpad, BN] -> the same rows of each part [Kpad, BN]
      w_.line("smuli s{}, s{}, {}", t, kt, d_ * bn_ * eb_b_);
      w_.line("sadd s{}, s{}, s{}", src, staging, t);
      w_.line("smuli s{}, s{}, {}", t, kt, d_ * bn_ * 2);
      w_.line("sadd s{}, s{}, s{}", dst, panel, t);
      const std::string loop = w_.new_label("convert");
      w_.line("sli s{}, 0", i);
      w_.load_immediate(n, d_ / kSublanes);
      w_.place(loop);
      const int x = vregs.take();
      for (int64_t c = 0; c < bn_ / kLanes; ++c) {
        w_.line("{} v{}, m0, s{}, {}, {}", load, x, src, c * kLanes * eb_b_, bn_ * eb_b_);
        store_parts(x, dst, c * kLanes * 2, bn_ * 2, vregs);
      }
      vregs.release(x);
      w_.line("saddi s{}, s{}, {}", src, src, kSublanes * bn_ * eb_b_);
      w_.line("saddi s{}, s{}, {}", dst, dst, kSublanes * bn_ * 2);
      w_.line("saddi s{}, s{}, 1", i, i);
      w_.line("blt s{}, s{}, {}", i, n, loop);
    } else {
      // staging [BN, Kpad]: each 128x128 block (n chunk c, k chunk q) is transposed in 16 vregs
      const int block = vregs.take_run(16);
      for (int64_t c = 0; c < bn_ / kLanes; ++c) {
        for (int q = 0; q < group_; ++q) {
          w_.line("smuli s{}, s{}, {}", t, kt, d_ * eb_b_);
          w_.line("saddi s{}, s{}, {}", src, t, c * kLanes * k_pad_ * eb_b_ + q * kLanes * eb_b_);
          w_.line("sadd s{}, s{}, s{}", src, src, staging);
          for (int v = 0; v < 16; ++v) {
            w_.line("{} v{}, m0, s{}, 0, {}", load, block + v, src, k_pad_ * eb_b_);
            w_.line("saddi s{}, s{}, {}", src, src, kSublanes * k_pad_ * eb_b_);
          }
          w_.line("vtrans v{}, v{}", block, block);
          w_.line("smuli s{}, s{}, {}", t, kt, d_ * bn_ * 2);
          w_.line("saddi s{}, s{}, {}", dst, t, q * kLanes * bn_ * 2 + c * kLanes * 2);
          w_.line("sadd s{}, s{}, s{}", dst, dst, panel);
          for (int v = 0; v < 16; ++v) {
            store_parts(block + v, dst, 0, bn_ * 2, vregs);
            w_.line("saddi s{}, s{}, {}", dst, dst, kSublanes * bn_ * 2);
          }
        }
      }
      vregs.release_run(block, 16);
    }
    for (int x : {src, dst, t, i, n}) r.release(x);
  }

  // Slice kt of the staged A^T [Kpad, BM] (this block's, of `parity`) into the A panel [BM, Kpad]
  // at s`a_base`: 128x128 blocks through vtrans.
  void transpose_a_slice(int kt, int a_base, int parity, RegisterPool& vregs) {
    auto& r = w_.sregs();
    const int src = r.take(), dst = r.take();
    const int block = vregs.take_run(16);
    const int64_t pitch = a_stage_pitch_, chunks = a_stage_pitch_ / eb_a_ / kLanes;
    for (int q = 0; q < group_; ++q) {
      for (int64_t ch = 0; ch < chunks; ++ch) {
        w_.line("smuli s{}, s{}, {}", src, kt, d_ * pitch);
        w_.line("saddi s{}, s{}, {}", src, src, int64_t(a_staging_[parity]) + q * kLanes * pitch + ch * kLanes * eb_a_);
        for (int v = 0; v < 16; ++v) {
          w_.line("{} v{}, m0, s{}, 0, {}", load_mnemonic(spec_.a_dtype), block + v, src, pitch);
          w_.line("saddi s{}, s{}, {}", src, src, kSublanes * pitch);
        }
        w_.line("vtrans v{}, v{}", block, block);
        w_.line("smuli s{}, s{}, {}", dst, kt, d_ * eb_a_);
        w_.line("sadd s{}, s{}, s{}", dst, dst, a_base);
        w_.line("saddi s{}, s{}, {}", dst, dst, ch * kLanes * k_pad_ * eb_a_ + q * kLanes * eb_a_);
        for (int v = 0; v < 16 && ch * kLanes + 8 * v < bm_; ++v) {  // the panel has BM rows
          w_.line("{} v{}, m0, s{}, 0, {}", store_mnemonic(spec_.a_dtype), block + v, dst, k_pad_ * eb_a_);
          w_.line("saddi s{}, s{}, {}", dst, dst, kSublanes * k_pad_ * eb_a_);
        }
      }
    }
    vregs.release_run(block, 16);
    r.release(src);
    r.release(dst);
  }

  // LHS part `part` of the 8 x D rows at s`addr` into the group starting at `g`.
  void load_lhs(int g, int addr, int part, RegisterPool& vregs) {
    for (int q = 0; q < group_; ++q) {
      w_.line("{} v{}, m0, s{}, {}, {}", load_mnemonic(spec_.a_dtype), g + q, addr, q * kLanes * eb_a_, k_pad_ * eb_a_);
      peel_bf16_parts(w_, vregs, g + q, 1, 0, part);
    }
  }

  // Registers of a block being drained: its coordinates, the C row cursor and the epilogue
  // operand cursors.
  struct Drain {
    int parity = 0;
    int bt = -1, nb = -1, mb = -1, tile = -1, crow = -1, scratch = -1, acc = -1;
    int slot0 = 0;
  };

  // Waits for what draining block s`block` (of `parity`) needs, and sets up its cursors.
  Drain begin_drain(int block, int parity, RegisterPool& vregs) {
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

  int full_epilogue_inputs() const {
    int n = 0;
    for (const auto& e : epilogue_) n += e.operand.layout == Layout::Full;
    return n;
  }

  // Pops accumulator row tile `rt` of every MXU, applies the epilogue and stores it to C in VMEM.
  void drain_row(Drain& d, int rt, RegisterPool& vregs, RegisterPool& masks) {
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
  void c_tile(int dst, int block, int mb, int parity) {
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
  void write_back(int bt, int nb, int mb, int parity, int tile, int sem, int64_t first, int64_t count, bool always_signal) {
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
    add_batch_offset(hb, bt, n_arg_, eb_c_, t);
    add_pitched(hb, row0, n_arg_, eb_c_, t);
    w_.add_scaled(hb, col0, eb_c_, t);
    w_.line("smuli s{}, s{}, {}", t, cols, eb_c_);
    if (tile >= 0) w_.line("saddi s{}, s{}, {}", col0, tile, first * bn_ * eb_c_);
    else w_.load_immediate(col0, c_vmem_[parity] + first * bn_ * eb_c_);
    dma(false, sem, col0, hb, rows, t, bn_ * eb_c_, n_arg_, eb_c_);
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

  // The deferred tiles are written back from block D - lead on, one per block, the tile of row
  // block block - (D - lead) (drained at least a block before): the first pass's last blocks,
  // past the next panel's pieces, have HBM to spare for `lead` of them. lead = min(kLead, D - 1).
  static constexpr int kDeferredLead = 1;
  void write_back_deferred(int block) {
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

  void release_drain(Drain& d, RegisterPool& vregs) {
    auto& r = w_.sregs();
    vregs.release_run(d.acc, group_);
    for (int x : {d.scratch, d.bt, d.nb, d.mb, d.crow}) r.release(x);
    if (d.tile >= 0) r.release(d.tile);
    for (auto& e : epilogue_) {
      if (e.cursor >= 0) r.release(e.cursor);
      e.cursor = -1;
    }
  }

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
  void emit_next_weights(const Compute& c, int scratch, bool streaming) {
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
      for (int j = 0; j < mxus_; ++j) {
        w_.line("mxu.lwb mxu{}, s{}, {}", j, scratch, bn_ * 2);
        w_.line("saddi s{}, s{}, {}", scratch, scratch, d_ * 2);
      }
    }
    w_.line("jmp {}", skip);
    w_.place(not_last);
    w_.line("{} s{}, s0, {}", streaming ? "bne" : "beq", c.mb, skip);
    if (streaming) w_.line("sem.wait sem{}, 1", kSemPanel);  // B(kt + 1)
    w_.line("smuli s{}, s{}, {}", scratch, c.kt, d_ * bn_ * 2);
    w_.line("saddi s{}, s{}, {}", scratch, scratch, d_ * bn_ * 2);
    w_.line("sadd s{}, s{}, s{}", scratch, scratch, c.panel);
    for (int j = 0; j < mxus_; ++j) {
      w_.line("mxu.lwb mxu{}, s{}, {}", j, scratch, bn_ * 2);
      w_.line("saddi s{}, s{}, {}", scratch, scratch, d_ * 2);
    }
    w_.place(skip);
  }

  // A block is drained over the first two K slices of the next (one when K has a single slice),
  // written back after each: spread out, the drain's pops and stores never hold up the front end
  // long enough to delay the next slice's weight load.
  int drain_parts() const { return kt_ >= 2 ? 2 : 1; }

  // One K slice: wait for its pieces (converting B's if staged), load the weights, issue the same
  // slice of the next block and stream the LHS rows. With `drain`, accumulator row tiles
  // [drain_first, drain_end) of the previous block are popped between this slice's first matmul
  // rows (their slots were filled long before), so the MXUs never idle while a block drains.
  void emit_slice(const Compute& c, Drain* drain, RegisterPool& vregs, RegisterPool& masks, int64_t drain_first = 0,
                  int64_t drain_end = 0) {
    auto& r = w_.sregs();
    const std::string have_a = w_.new_label("have_a"), have_b = w_.new_label("have_b"),
                      no_prefetch = w_.new_label("no_prefetch");
    int row = -1, wt = -1, t = -1;
    const auto take = [&] { row = r.take(), wt = r.take(), t = r.take(); };
    take();
    if (pipelined()) {
      // Slice 0 of a panel's first row block waits for its piece and loads its weights; every
      // other slice switches to the ones loaded during the slice before (emit_next_weights),
      // which waited for their B piece there.
      const std::string later = w_.new_label("later_slice"), ready = w_.new_label("weights_ready");
      w_.line("bne s{}, s0, {}", c.kt, later);
      w_.line("bne s{}, s0, {}", c.mb, later);
      w_.line("sem.wait sem{}, 1", kSemPanel);
      for (int j = 0; j < mxus_; ++j) {
        w_.line("saddi s{}, s{}, {}", t, c.panel, int64_t(j) * d_ * 2);
        w_.line("mxu.lw mxu{}, s{}, {}", j, t, bn_ * 2);
      }
      w_.line("jmp {}", ready);
      w_.place(later);
      for (int j = 0; j < mxus_; ++j) w_.line("mxu.swap mxu{}", j);
      w_.place(ready);
    } else {
      w_.line("bne s{}, s0, {}", c.mb, have_b);
      w_.line("sem.wait sem{}, 1", kSemPanel);
      if (staged_) convert_slice(c.kt, c.panel, c.staging, vregs);
      w_.place(have_b);
    }
    skip_unless_a_needed(c.nb, have_a);
    w_.line("sem.wait sem{}, 1", kSemInput);
    if (spec_.a_transposed) transpose_a_slice(c.kt, c.a_base, c.parity, vregs);
    w_.place(have_a);
    const int slot0 = c.parity * static_cast<int>(bm_ / kSublanes);
    int last_b_part = pipelined() ? 0 : -1;  // pipelined: the weights are in place already
    for (size_t pass = 0; pass < pairs_.size(); ++pass) {
      const auto [a_part, b_part] = pairs_[pass];
      if (b_part != last_b_part) {
        w_.line("smuli s{}, s{}, {}", wt, c.kt, d_ * bn_ * 2);
        w_.line("sadd s{}, s{}, s{}", wt, wt, c.panel);
        for (int j = 0; j < mxus_; ++j) {
          w_.line("saddi s{}, s{}, {}", t, wt, int64_t(b_part) * int64_t(part_bytes_) + int64_t(j) * d_ * 2);
          w_.line("mxu.lw mxu{}, s{}, {}", j, t, bn_ * 2);
        }
        last_b_part = b_part;
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
          load_lhs(g, row, a_part, vregs);
          for (int j = 0; j < mxus_; ++j) w_.line("mxu.mm mxu{}, v{}, {}", j, g, slot0 + rt);
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
  }

  // The next column block's B panel, spread over the pass: its KT pieces go out at every
  // (R - 1)th of the K slices of row blocks 1 .. R - 1 (R row blocks), on dq2, so they share HBM
  // with the pass's own traffic instead of queueing in front of it (HBM serves DMAs in issue
  // order) or after it. The panel's buffer was last read by the pass before, a block ago.
  void issue_next_panel_piece(const Compute& c) {
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

  void compute_block(int block, int next, int nblocks, int parity, RegisterPool& vregs, RegisterPool& masks) {
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
    w_.line("smuli s{}, s{}, {}", c.panel, c.panel, int64_t(b_parts_ * part_bytes_));
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

  void emit() {
    auto& r = w_.sregs();
    RegisterPool vregs("vector registers", 0, 31), masks("mask registers", 1, 7);
    const int block = r.take(), next = r.take(), nblocks = r.take();
    check_shape(block, next);
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

  // Drains the last block, each 8-row tile written back as soon as it is drained: the write-back
  // of the last block's C cannot hide behind anything, so it starts as early as it can.
  void final_drain(int block, int parity, RegisterPool& vregs, RegisterPool& masks) {
    Drain d = begin_drain(block, parity, vregs);
    for (int64_t rt = 0; rt < bm_ / kSublanes; ++rt) {
      drain_row(d, static_cast<int>(rt), vregs, masks);
      write_back(d.bt, d.nb, d.mb, d.parity, d.tile, kSemOutput + d.parity, rt * kSublanes, kSublanes, false);
    }
    release_drain(d, vregs);
  }

  // Traps (#1) unless the launch's shape fits the program: 1 <= M <= spec.m (the rows VMEM was
  // sized for), 1 <= N <= spec.n (its columns) and spec.k - D < K <= spec.k (its K slices: the
  // K loops run spec.k / D slices, so K must reach the last one).
  void check_shape(int scratch0, int scratch1) {
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
      w_.line("trap 1");
    });
  }

  const MatmulSpec& spec_;
  const sim::ChipConfig& chip_;
  AsmWriter w_;
  std::vector<std::pair<int, int>> pairs_;
  std::vector<EpilogueBuffer> epilogue_;
  int64_t d_ = 128, bn_ = 0, bm_ = 0, k_pad_ = 0, kt_ = 0;
  int group_ = 1, mxus_ = 1, eb_a_ = 2, eb_b_ = 2, eb_c_ = 4, a_parts_ = 1, b_parts_ = 1;
  bool overlap_passes_ = true;
  bool staged_ = false, a_resident_ = false, defer_ = false, panels_ahead_ = false;
  uint64_t a_vmem_[2] = {0, 0}, c_vmem_[2] = {0, 0}, panel_vmem_ = 0, staging_vmem_ = 0;
  uint64_t a_panel_bytes_ = 0, part_bytes_ = 0, staging_bytes_ = 0, c_tile_bytes_ = 0;
  uint64_t a_staging_[2] = {0, 0}, a_stage_pitch_ = 0;  // transposed A: staging per parity, its row pitch
  int a_arg_ = 0, b_arg_ = 0, c_arg_ = 0, m_arg_ = 0, n_arg_ = 0, k_arg_ = 0;
  int row_blocks_ = -1;  // the scalar register holding ceil(M / BM)
  int deferred_blocks_ = -1;  // with defer_: the scalar register holding D, the deferred blocks
  uint64_t c_deferred_vmem_ = 0;  // with defer_: one C tile per row block
};

}  // namespace

int passes_for_precision(std::string_view precision) {
  if (precision == "highest") return 6;
  if (precision == "high") return 3;
  if (precision == "medium") return 1;
  throw KernelError(fmt::format("unknown float32 matmul precision '{}' (highest, high or medium)", precision));
}

isa::Program make_matmul(const MatmulSpec& spec, const sim::ChipConfig& chip) {
  try {
    return MatmulBuilder(spec, chip, /*overlap_passes=*/true).build();
  } catch (const RegisterShortage&) {  // many epilogue operands: the plainer schedule holds fewer
    return MatmulBuilder(spec, chip, /*overlap_passes=*/false).build();
  }
}

std::vector<int32_t> matmul_scalars(const MatmulSpec& spec, const sim::ChipConfig& chip, int64_t m, int64_t n, int64_t k) {
  const int64_t d = chip.mxu_dim, k_pad = round_up(spec.k, d);
  if (m < 1 || m > spec.m || n < 1 || n > spec.n || k <= k_pad - d || k > spec.k) {
    throw KernelError(fmt::format("matmul: a launch of {}x{}x{} does not fit a program for {}x{}x{}", m, n, k, spec.m, spec.n, spec.k));
  }
  return {int32_t(m), int32_t(n), int32_t(k)};
}

}  // namespace vtpu::kernels
