// Blocks of BR rows x BC cols in row-major block order, through the double-buffered job loop
// (kernels/codegen/job_loop.h): set s waits on sem s for its inputs and on sem 2+s for the write-back of
// the block that used the set before. Block b+1's inputs are issued before block b computes, so
// DMA overlaps compute. Padding lanes and sublanes of a ragged block compute garbage that is
// never written back (only the valid region is DMA'd out).
#include "kernels/codegen/block_stream.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>

#include "kernels/codegen/job_loop.h"
#include "kernels/codegen/vmem_layout.h"
#include "kernels/codegen/vreg_shape.h"

namespace vtpu::kernels {
namespace {

constexpr int kSemInput = 0, kSemOutput = 2, kSemPrologue = 4;
constexpr int64_t kMinBlocks = 4;
constexpr uint64_t kLatencyBlocks = 4;  // a buffer set's transfer lasts this many HBM round trips

// VMEM per buffer set at which a block's DMAs last several HBM round trips: the loop keeps one
// block in flight while the other computes, so with shorter blocks HBM idles through each
// latency (on v6e, 256 KiB blocks reached 59% of HBM bandwidth on a copy). Every TensorCore
// streams its share of the blocks with its share of the bandwidth, so the bytes in flight per
// core are the chip's over its cores (larger blocks only lengthen each core's first load).
uint64_t latency_hiding_bytes(const sim::ChipConfig& chip) {
  const double bytes_per_cycle = chip.hbm_bytes_per_cycle() / chip.tensor_cores;
  return uint64_t(kLatencyBlocks * bytes_per_cycle * chip.hbm_latency_cycles()) / 4096 * 4096;
}

}  // namespace

BlockStream::BlockStream(AsmWriter& w, const sim::ChipConfig& chip, int64_t rows, int64_t cols,
                         std::vector<StreamOperand> operands, int64_t max_block_cols, uint64_t budget_bytes,
                         int64_t extra_row_bytes, bool flat, int64_t row_granule)
    : w_(w), operands_(std::move(operands)), granule_(row_granule) {
  if (rows < 1 || cols < 1) throw KernelError("empty tensors need no kernel");
  if (granule_ < kSublanes || !std::has_single_bit(uint64_t(granule_))) throw KernelError("block rows come in powers of two of at least 8");
  for (const auto& o : operands_) {
    if (o.layout == Layout::Periodic && granule_ != kSublanes) throw KernelError("periodic operands' blocks shrink by 8 rows");
  }
  if (flat) {
    if (cols % kLanes != 0 || cols > max_block_cols) throw KernelError("a flat stream's rows are whole blocks of 128-lane columns");
    for (const auto& o : operands_) {
      if (o.layout != Layout::Full && o.layout != Layout::Scalar) throw KernelError("a flat stream's operands are Full or Scalar");
    }
  }
  if (rows * cols >= (int64_t{1} << 31)) throw KernelError("tensor too large for one launch");
  bc_ = std::min(cols, max_block_cols);
  bc_pad_ = round_up(bc_, kLanes);
  int64_t bytes_per_row = extra_row_bytes;
  for (const auto& o : operands_) {
    if (!dtype_on_chip(o.dtype)) throw KernelError(fmt::format("{} is not supported on the chip", dtype_name(o.dtype)));
    if (is_rowwise_stored(o.layout)) bytes_per_row += bc_pad_ * dtype_bytes(o.dtype);
    if (o.output && o.layout != Layout::Full && o.layout != Layout::Column) throw KernelError("outputs are Full or Column");
    if (o.strided && (o.output || o.layout != Layout::Full || flat)) throw KernelError("only Full inputs of a 2-D stream are read strided");
  }
  const uint64_t budget = std::max(budget_bytes, latency_hiding_bytes(chip));
  br_ = std::max<int64_t>(granule_, int64_t(budget) / std::max<int64_t>(bytes_per_row, 1) / granule_ * granule_);
  br_ = std::min(br_, round_up(rows, granule_));
  for (const auto& o : operands_) {
    if (o.output && o.layout == Layout::Column && bc_ < cols) throw KernelError("a Column output needs whole rows per block");
  }

  VmemLayout vmem_layout;
  for (size_t i = 0; i < operands_.size(); ++i) {
    const auto& o = operands_[i];
    const int eb = dtype_bytes(o.dtype);
    Buffer b;
    b.arg = w_.argument(fmt::format("{}{}", o.output ? "out" : "in", i), isa::ArgumentKind::Buffer);
    const int64_t pad = int64_t{kLanes} * eb;  // room for a full-width read past the end
    uint64_t bytes = 0;
    switch (o.layout) {
      case Layout::Full: case Layout::Periodic: bytes = br_ * bc_pad_ * eb; break;
      case Layout::Row: bytes = bc_pad_ * eb; break;
      case Layout::Column: bytes = br_ * eb + pad; break;
      case Layout::Scalar: bytes = pad; break;
    }
    b.row_stride = bc_pad_ * eb;
    b.vmem[0] = vmem_layout.place(bytes);
    // A Row operand of a stream one block wide is the same for every block: loaded once, shared by
    // both sets (a bias is not fetched again per block). Columns as wide as the widest block may
    // stand for any wider count (the elementwise planner's column bucket stops there).
    b.resident = o.layout == Layout::Scalar || (o.layout == Layout::Row && !o.output && cols < max_block_cols);
    b.vmem[1] = b.resident ? b.vmem[0] : vmem_layout.place(bytes);
    buffers_.push_back(b);
  }
  rows_arg_ = w_.argument("rows", isa::ArgumentKind::Scalar);
  cols_arg_ = w_.argument("cols", isa::ArgumentKind::Scalar);
  if (flat) elements_arg_ = w_.argument("elements", isa::ArgumentKind::Scalar);
  for (size_t i = 0; i < operands_.size(); ++i) {
    if (operands_[i].layout == Layout::Periodic) buffers_[i].period_arg = w_.argument(fmt::format("period{}", i), isa::ArgumentKind::Scalar);
  }
  for (size_t i = 0; i < operands_.size(); ++i) {
    if (!operands_[i].strided) continue;
    buffers_[i].stride_arg = w_.argument(fmt::format("stride{}", i), isa::ArgumentKind::Scalar);
    buffers_[i].offset_arg = w_.argument(fmt::format("offset{}", i), isa::ArgumentKind::Scalar);
  }
  for (int set = 0; set < 2; ++set) extra_[set] = extra_row_bytes ? vmem_layout.place(br_ * extra_row_bytes) : vmem_layout.end();
  vmem_end_ = vmem_layout.end();
  if (vmem_layout.end() > chip.kernel_vmem_bytes()) throw KernelError(fmt::format("needs {} bytes of VMEM, {} has {}", vmem_layout.end(), chip.name, chip.kernel_vmem_bytes()));
}

std::vector<int> BlockStream::take_buffer_bases(int set) {
  std::vector<int> bases(operands_.size(), -1);
  for (size_t i = 0; i < operands_.size(); ++i) {
    if (operands_[i].layout == Layout::Scalar) continue;
    bases[i] = w_.sregs().take();
    w_.load_immediate(bases[i], vmem(i, set));
  }
  return bases;
}

int BlockStream::streamed_inputs() const {
  int n = 0;
  for (size_t i = 0; i < operands_.size(); ++i) n += !operands_[i].output && !buffers_[i].resident;
  return n;
}

int BlockStream::outputs() const {
  int n = 0;
  for (const auto& o : operands_) n += o.output;
  return n;
}

void BlockStream::size_blocks() {
  auto& s = w_.sregs();
  br_reg_ = s.take();
  col_blocks_reg_ = s.take();
  const int t = s.take();
  // A block must not cross a Periodic operand's period, so one DMA fetches its rows: the block
  // rows shrink by 8 until they divide every period (periods are multiples of 8; the planner and
  // stream_scalars check that).
  // Below the budget the launch's rows still split into kMinBlocks blocks per TensorCore, so all
  // but each core's first block's load and last block's write-back overlap compute:
  // BR = min(BR, ceil(rows / (4 * granule * cores)) * granule), granule 8 but for callers that
  // compute larger groups of rows.
  static_assert(kMinBlocks == 4);
  const int granule_bits = std::countr_zero(uint64_t(granule_));
  w_.line("sncore s{}", t);
  w_.line("sshli s{}, s{}, {}", t, t, 2 + granule_bits);
  w_.line("sarg s{}, {}", br_reg_, rows_arg_);
  w_.line("sadd s{}, s{}, s{}", br_reg_, br_reg_, t);
  w_.line("saddi s{}, s{}, -1", br_reg_, br_reg_);
  w_.line("sdiv s{}, s{}, s{}", br_reg_, br_reg_, t);
  w_.line("sshli s{}, s{}, {}", br_reg_, br_reg_, granule_bits);
  w_.load_immediate(t, br_);
  w_.line("smin s{}, s{}, s{}", br_reg_, br_reg_, t);
  for (const Buffer& b : buffers_) {
    if (b.period_arg < 0) continue;
    const std::string check = w_.new_label("divides"), ok = w_.new_label("divides_ok");
    w_.place(check);
    w_.line("sarg s{}, {}", t, b.period_arg);
    w_.line("srem s{}, s{}, s{}", t, t, br_reg_);
    w_.line("beq s{}, s0, {}", t, ok);
    w_.line("saddi s{}, s{}, {}", br_reg_, br_reg_, -kSublanes);
    w_.line("jmp {}", check);
    w_.place(ok);
  }
  // column blocks = ceil(cols / BC)
  w_.ceil_div_argument(col_blocks_reg_, cols_arg_, bc_, t);
  s.release(t);
}

void BlockStream::block_extent(int block_reg, const BlockExtent& e) {
  auto& s = w_.sregs();
  const int t = s.take();
  w_.line("sdiv s{}, s{}, s{}", e.row0, block_reg, col_blocks_reg_);
  w_.line("srem s{}, s{}, s{}", e.col0, block_reg, col_blocks_reg_);
  w_.line("smul s{}, s{}, s{}", e.row0, e.row0, br_reg_);
  w_.line("smuli s{}, s{}, {}", e.col0, e.col0, bc_);
  w_.line("sarg s{}, {}", t, rows_arg_);
  w_.line("ssub s{}, s{}, s{}", e.rows, t, e.row0);
  w_.line("smin s{}, s{}, s{}", e.rows, e.rows, br_reg_);
  w_.line("sarg s{}, {}", t, cols_arg_);
  w_.line("ssub s{}, s{}, s{}", e.cols, t, e.col0);
  w_.load_immediate(t, bc_);
  w_.line("smin s{}, s{}, s{}", e.cols, e.cols, t);
  s.release(t);
}

void BlockStream::block_dma(size_t operand, int set, int sem, const BlockExtent& e) {
  if (elements_arg_ >= 0) return flat_block_dma(operand, set, sem, e);
  const auto& o = operands_[operand];
  const Buffer& b = buffers_[operand];
  const int eb = dtype_bytes(o.dtype);
  auto& s = w_.sregs();
  const int vm = s.take(), hb = s.take(), rows = s.take(), row_bytes = s.take(), vstride = s.take(), hstride = s.take();
  w_.load_immediate(vm, b.vmem[set]);
  w_.line("sarg s{}, {}", hb, b.arg);
  if (is_rowwise_stored(o.layout)) {
    // hbm offset = (row0 * cols + col0) * eb, row0 taken mod the period; a strided view's rows
    // are its stride apart and start at its offset
    w_.line("sarg s{}, {}", hstride, o.strided ? b.stride_arg : cols_arg_);
    if (o.strided) {
      w_.line("smul s{}, s{}, s{}", rows, hstride, e.row0);
      w_.line("sarg s{}, {}", row_bytes, b.offset_arg);
      w_.line("sadd s{}, s{}, s{}", rows, rows, row_bytes);
    } else if (o.layout == Layout::Periodic) {
      w_.line("sarg s{}, {}", row_bytes, b.period_arg);
      w_.line("srem s{}, s{}, s{}", row_bytes, e.row0, row_bytes);
      w_.line("smul s{}, s{}, s{}", rows, hstride, row_bytes);
    } else {
      w_.line("smul s{}, s{}, s{}", rows, hstride, e.row0);
    }
    w_.line("sadd s{}, s{}, s{}", rows, rows, e.col0);
    w_.add_scaled(hb, rows, eb, rows);
    w_.line("smov s{}, s{}", rows, e.rows);
    w_.line("smuli s{}, s{}, {}", row_bytes, e.cols, eb);
    w_.load_immediate(vstride, b.row_stride);
    w_.line("smuli s{}, s{}, {}", hstride, hstride, eb);
  } else {
    const int offset = o.layout == Layout::Row ? e.col0 : e.row0;
    const int count = o.layout == Layout::Row ? e.cols : e.rows;
    w_.add_scaled(hb, offset, eb, rows);
    w_.load_immediate(rows, 1);
    w_.line("smuli s{}, s{}, {}", row_bytes, count, eb);
    w_.line("smov s{}, s{}", vstride, row_bytes);
    w_.line("smov s{}, s{}", hstride, row_bytes);
  }
  w_.dma(!o.output, o.output ? 1 : 0, sem,
         {.vmem = vm, .hbm = hb, .rows = rows, .row_bytes = row_bytes, .vmem_stride = vstride, .hbm_stride = hstride});
  for (int r : {vm, hb, rows, row_bytes, vstride, hstride}) s.release(r);
}

// A flat block is one contiguous run: its rows of BC elements, cut at the buffer's end.
void BlockStream::flat_block_dma(size_t operand, int set, int sem, const BlockExtent& e) {
  const auto& o = operands_[operand];
  const int eb = dtype_bytes(o.dtype);
  auto& s = w_.sregs();
  const int vm = s.take(), hb = s.take(), one = s.take(), bytes = s.take(), t = s.take();
  w_.load_immediate(vm, buffers_[operand].vmem[set]);
  w_.line("sarg s{}, {}", hb, buffers_[operand].arg);
  w_.line("smuli s{}, s{}, {}", t, e.row0, bc_);  // the block's first element
  w_.add_scaled(hb, t, eb, one);
  w_.line("sarg s{}, {}", bytes, elements_arg_);
  w_.line("ssub s{}, s{}, s{}", bytes, bytes, t);  // elements from there to the end
  w_.line("smuli s{}, s{}, {}", t, e.rows, bc_);
  w_.line("smin s{}, s{}, s{}", bytes, bytes, t);
  w_.line("smuli s{}, s{}, {}", bytes, bytes, eb);
  w_.load_immediate(one, 1);
  w_.dma(!o.output, o.output ? 1 : 0, sem, {.vmem = vm, .hbm = hb, .rows = one, .row_bytes = bytes, .vmem_stride = bytes, .hbm_stride = bytes});
  for (int r : {vm, hb, one, bytes, t}) s.release(r);
}

void BlockStream::issue_inputs(int block_reg, int set) {
  auto& s = w_.sregs();
  const BlockExtent e{s.take(), s.take(), s.take(), s.take()};
  block_extent(block_reg, e);
  for (size_t i = 0; i < operands_.size(); ++i) {
    if (!operands_[i].output && !buffers_[i].resident) block_dma(i, set, kSemInput + set, e);
  }
  for (int r : {e.row0, e.col0, e.rows, e.cols}) s.release(r);
}

void BlockStream::load_resident(RegisterPool& vregs) {
  auto& s = w_.sregs();
  for (size_t i = 0; i < operands_.size(); ++i) {
    Buffer& b = buffers_[i];
    if (operands_[i].output || !b.resident) continue;
    const bool scalar = operands_[i].layout == Layout::Scalar;
    const int eb = dtype_bytes(operands_[i].dtype);
    const int vm = s.take(), hb = s.take(), one = s.take(), bytes = s.take();
    w_.load_immediate(vm, b.vmem[0]);
    w_.line("sarg s{}, {}", hb, b.arg);
    w_.load_immediate(one, 1);
    if (scalar) {
      w_.load_immediate(bytes, eb);
    } else {  // the row: the launch's columns
      w_.line("sarg s{}, {}", bytes, cols_arg_);
      w_.line("smuli s{}, s{}, {}", bytes, bytes, eb);
    }
    w_.dma_to_vmem(0, kSemPrologue, {.vmem = vm, .hbm = hb, .rows = one, .row_bytes = bytes, .vmem_stride = bytes, .hbm_stride = bytes});
    w_.line("sem.wait sem{}, 1", kSemPrologue);
    if (scalar) {
      b.scalar_vreg = vregs.take();
      load_scalar_broadcast(w_, operands_[i].dtype, b.scalar_vreg, vm);
    }
    for (int r : {vm, hb, one, bytes}) s.release(r);
  }
}

void BlockStream::emit(RegisterPool& vregs, const std::function<void(int, const BlockExtent&)>& compute) {
  // Scalar registers are the budget that caps how many operands a kernel streams, so the block's
  // extent is handed to `compute` to release once read, and recomputed for the write-backs.
  auto& s = w_.sregs();
  load_resident(vregs);
  size_blocks();
  const int block = s.take(), next = s.take(), nblocks = s.take();
  // blocks = ceil(rows / BR) * column blocks, from the shape passed at launch
  w_.line("sarg s{}, {}", nblocks, rows_arg_);
  w_.line("sadd s{}, s{}, s{}", nblocks, nblocks, br_reg_);
  w_.line("saddi s{}, s{}, -1", nblocks, nblocks);
  w_.line("sdiv s{}, s{}, s{}", nblocks, nblocks, br_reg_);
  w_.line("smul s{}, s{}, s{}", nblocks, nblocks, col_blocks_reg_);
  // Each set's write-back semaphore starts as if a write-back had landed, so the first two blocks
  // wait for nothing (no branch, no register for the test).
  for (int set = 0; set < 2; ++set) w_.line("sem.signal sem{}, {}", kSemOutput + set, outputs());
  // Blocks are independent, so each TensorCore streams a contiguous share of them.
  w_.split_across_cores();
  emit_job_loop(w_, block, next, nblocks, kSemInput, streamed_inputs(), [&](int b, int set) { issue_inputs(b, set); },
                [&](int set) {
                  w_.line("sem.wait sem{}, {}", kSemOutput + set, outputs());  // the set's previous write-back has landed
                  BlockExtent e{s.take(), s.take(), s.take(), s.take()};
                  block_extent(block, e);
                  compute(set, e);  // releases e's registers
                  e = {s.take(), s.take(), s.take(), s.take()};
                  block_extent(block, e);
                  for (size_t i = 0; i < operands_.size(); ++i) {
                    if (operands_[i].output) block_dma(i, set, kSemOutput + set, e);
                  }
                  for (int r : {e.row0, e.col0, e.rows, e.cols}) s.release(r);
                },
                {.across_cores = true});
  for (int r : {block, next, nblocks, br_reg_, col_blocks_reg_}) s.release(r);
}

void load_operand_tile(AsmWriter& w, DType dtype, Layout layout, int vreg, int reg, int64_t offset, int64_t row_stride) {
  const char* m = load_mnemonic(dtype);
  switch (layout) {
    case Layout::Full: case Layout::Periodic: w.line("{} v{}, m0, s{}, {}, {}", m, vreg, reg, offset, row_stride); break;
    case Layout::Row: w.line("{} v{}, m0, s{}, {}, 0", m, vreg, reg, offset); break;
    case Layout::Column:  // sublane i reads from element i: lane 0 of each sublane holds its row's value
      w.line("{} v{}, m0, s{}, {}, {}", m, vreg, reg, offset, dtype_bytes(dtype));
      w.line("vbcast.lane v{}, v{}, 0", vreg, vreg);
      break;
    case Layout::Scalar: throw KernelError("scalar operands live in a register, they are not loaded per tile");
  }
}

void load_tile(AsmWriter& w, const BlockStream& stream, size_t i, int vreg, int cursor, int column_cursor, int64_t offset) {
  const auto& o = stream.operand(i);
  const bool column = o.layout == Layout::Column;
  load_operand_tile(w, o.dtype, o.layout, vreg, column ? column_cursor : cursor, column ? 0 : offset, stream.row_stride(i));
}

void load_scalar_broadcast(AsmWriter& w, DType dtype, int vreg, int vmem_reg) {
  // Every sublane reads the same 128 elements (row stride 0; the buffer is padded for it), and
  // lane 0 is broadcast. No mask register: those belong to the caller's pool (a row kernel keeps
  // its per-row store mask in one across the whole launch).
  w.line("{} v{}, m0, s{}, 0, 0", load_mnemonic(dtype), vreg, vmem_reg);
  w.line("vbcast.lane v{}, v{}, 0", vreg, vreg);
}

}  // namespace vtpu::kernels
