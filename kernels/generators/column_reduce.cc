// Jobs are (strip, row block), row blocks fastest, so a strip's blocks run back to back and its
// G accumulators (one vreg per 128 columns) live in registers across them: reset on the strip's
// first block, reduced over sublanes and written out on its last. Rows past the end of a ragged
// block are replaced by the reduction's identity (a sublane mask from `vmaskn`). Block j+1's DMA
// is issued before block j is reduced, alternating two VMEM buffers (kernels/codegen/job_loop.h).
#include "kernels/generators/column_reduce.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "kernels/codegen/asm_writer.h"
#include "kernels/generators/elementwise.h"
#include "kernels/codegen/job_loop.h"
#include "kernels/codegen/vreg_shape.h"

namespace vtpu::kernels {
namespace {

constexpr int kSemIn = 0, kSemOut = 2;
constexpr int kMaxStripRegs = 8;                 // accumulators: a strip is at most 1024 columns
constexpr int64_t kBlockBytes = 256 * 1024;      // per input buffer
constexpr int kRowsArg = 2, kColsArg = 3;

class ColumnReduceWriter {
 public:
  ColumnReduceWriter(const ColumnReduceSpec& spec, const sim::ChipConfig& chip) : spec_(spec), w_("column_reduce") {
    g_ = static_cast<int>(std::clamp<int64_t>((spec.cols + kLanes - 1) / kLanes, 1, kMaxStripRegs));
    width_ = int64_t{g_} * kLanes;
    eb_ = dtype_bytes(spec.in_dtype);
    br_ = std::clamp<int64_t>(kBlockBytes / (width_ * eb_) / kSublanes * kSublanes, kSublanes, 512);
    in_[0] = 0;
    in_[1] = round_up(br_ * width_ * eb_, 512);
    out_ = 2 * in_[1];
    if (out_ + uint64_t(width_) * kSublanes * 4 > chip.kernel_vmem_bytes()) throw KernelError("column reduce: VMEM too small");
  }

  isa::Program write() {
    auto& s = w_.sregs();
    w_.argument("x", isa::ArgumentKind::Buffer);
    w_.argument("out", isa::ArgumentKind::Buffer);
    w_.argument("rows", isa::ArgumentKind::Scalar);
    w_.argument("cols", isa::ArgumentKind::Scalar);
    const int job = s.take(), next = s.take(), jobs = s.take();
    row_blocks_ = s.take();
    // row blocks = ceil(rows / BR); jobs = strips * row blocks, strips = ceil(cols / W)
    w_.ceil_div_argument(row_blocks_, kRowsArg, br_, next);
    w_.ceil_div_argument(jobs, kColsArg, width_, next);
    w_.line("smul s{}, s{}, s{}", jobs, jobs, row_blocks_);
    acc_ = vregs_.take_run(g_);
    identity_ = vregs_.take();
    w_.load_float(next, identity());
    w_.line("vbcast v{}, s{}", identity_, next);
    // A strip's row blocks share its accumulators, so TensorCores take whole strips (a reduction
    // of one strip, at most 1024 columns, runs on one core).
    emit_job_loop(w_, job, next, jobs, kSemIn, 1, [&](int j, int set) { issue_input(j, set); },
                  [&](int set) { reduce_block(job, set); }, {.across_cores = true, .unit = row_blocks_});
    w_.split_across_cores();
    return w_.assemble();
  }

 private:
  float identity() const {
    constexpr float inf = std::numeric_limits<float>::infinity();
    return spec_.op == RowOp::Max ? -inf : spec_.op == RowOp::Min ? inf : 0.f;
  }

  // (strip, row block) of s`job` into s`strip`, s`block`; s`row0` = block * BR, s`rows` = valid
  // rows of the block, s`col0` = strip * W, s`cols` = valid columns of the strip.
  void decode(int job, int strip, int block, int row0, int rows, int col0, int cols) {
    const int t = w_.sregs().take();
    w_.line("sdiv s{}, s{}, s{}", strip, job, row_blocks_);
    w_.line("srem s{}, s{}, s{}", block, job, row_blocks_);
    w_.line("smuli s{}, s{}, {}", row0, block, br_);
    w_.line("smuli s{}, s{}, {}", col0, strip, width_);
    w_.line("sarg s{}, {}", rows, kRowsArg);
    w_.line("ssub s{}, s{}, s{}", rows, rows, row0);
    w_.load_immediate(t, br_);
    w_.line("smin s{}, s{}, s{}", rows, rows, t);
    w_.line("sarg s{}, {}", cols, kColsArg);
    w_.line("ssub s{}, s{}, s{}", cols, cols, col0);
    w_.load_immediate(t, width_);
    w_.line("smin s{}, s{}, s{}", cols, cols, t);
    w_.sregs().release(t);
  }

  void issue_input(int job, int set) {
    auto& s = w_.sregs();
    const int strip = s.take(), block = s.take(), row0 = s.take(), rows = s.take(), col0 = s.take(), cols = s.take();
    decode(job, strip, block, row0, rows, col0, cols);
    const int vm = s.take(), hb = s.take(), t = s.take(), hs = s.take();
    // x + (row0 * cols_total + col0) * eb
    w_.line("sarg s{}, {}", hs, kColsArg);
    w_.line("smul s{}, s{}, s{}", t, row0, hs);
    w_.line("sadd s{}, s{}, s{}", t, t, col0);
    w_.line("sarg s{}, 0", hb);
    w_.add_scaled(hb, t, eb_, t);
    w_.line("smuli s{}, s{}, {}", hs, hs, eb_);
    w_.line("smuli s{}, s{}, {}", cols, cols, eb_);
    w_.load_immediate(vm, in_[set]);
    w_.load_immediate(t, width_ * eb_);
    w_.dma_to_vmem(0, kSemIn + set, {.vmem = vm, .hbm = hb, .rows = rows, .row_bytes = cols, .vmem_stride = t, .hbm_stride = hs});
    for (int r : {strip, block, row0, rows, col0, cols, vm, hb, t, hs}) s.release(r);
  }

  void combine(int acc, int v) {
    const char* op = spec_.op == RowOp::Max ? "vmax" : spec_.op == RowOp::Min ? "vmin" : "vadd";
    w_.line("{} v{}, v{}, v{}", op, acc, acc, v);
  }

  void reduce_block(int job, int set) {
    auto& s = w_.sregs();
    const int strip = s.take(), block = s.take(), row0 = s.take(), rows = s.take(), col0 = s.take(), cols = s.take();
    decode(job, strip, block, row0, rows, col0, cols);
    const std::string keep = w_.new_label("keep_partials");
    w_.line("bne s{}, s0, {}", block, keep);  // the strip's first block starts from the identity
    for (int i = 0; i < g_; ++i) w_.line("vmov v{}, v{}", acc_ + i, identity_);
    w_.place(keep);
    const int at = s.take(), remaining = s.take(), t = s.take();
    const int v = vregs_.take();
    const std::string group = w_.new_label("group"), groups_done = w_.new_label("groups_done");
    w_.load_immediate(at, in_[set]);
    w_.line("smov s{}, s{}", remaining, rows);
    w_.place(group);
    w_.line("bge s0, s{}, {}", remaining, groups_done);
    w_.line("smuli s{}, s{}, {}", t, remaining, kLanes);  // rows past the block's end: the identity
    w_.line("vmaskn m1, s{}", t);
    for (int i = 0; i < g_; ++i) {
      w_.line("{} v{}, m0, s{}, {}, {}", load_mnemonic(spec_.in_dtype), v, at, int64_t{i} * kLanes * eb_, width_ * eb_);
      w_.line("vsel v{}, m1, v{}, v{}", v, v, identity_);
      combine(acc_ + i, v);
    }
    w_.line("saddi s{}, s{}, {}", at, at, int64_t{kSublanes} * width_ * eb_);
    w_.line("saddi s{}, s{}, {}", remaining, remaining, -kSublanes);
    w_.line("jmp {}", group);
    w_.place(groups_done);
    const std::string not_last = w_.new_label("not_last");
    w_.line("saddi s{}, s{}, 1", t, block);
    w_.line("blt s{}, s{}, {}", t, row_blocks_, not_last);
    finish_strip(col0, cols, v);
    w_.place(not_last);
    vregs_.release(v);
    for (int r : {strip, block, row0, rows, col0, cols, at, remaining, t}) s.release(r);
  }

  // The strip's last block: sublanes reduced, sublane 0 stored and DMA'd to out[col0 ..].
  void finish_strip(int col0, int cols, int v) {
    auto& s = w_.sregs();
    const int vm = s.take(), hb = s.take(), t = s.take(), one = s.take();
    if (spec_.op == RowOp::Mean) {  // divided by the launch's row count
      w_.line("sarg s{}, {}", t, kRowsArg);
      w_.line("vbcast v{}, s{}", v, t);
      w_.line("vcvt.i2f v{}, v{}", v, v);
    }
    w_.load_immediate(t, kLanes);
    w_.line("vmaskn m1, s{}", t);  // sublane 0
    w_.load_immediate(vm, out_);
    for (int i = 0; i < g_; ++i) {
      const int acc = acc_ + i;
      switch (spec_.op) {
        case RowOp::Max: w_.line("vredmax.sub v{}, v{}", acc, acc); break;
        case RowOp::Min:  // min = -max(-x): the cross-lane unit has no min over sublanes
          w_.line("vneg v{}, v{}", acc, acc);
          w_.line("vredmax.sub v{}, v{}", acc, acc);
          w_.line("vneg v{}, v{}", acc, acc);
          break;
        default: w_.line("vredsum.sub v{}, v{}", acc, acc); break;
      }
      if (spec_.op == RowOp::Mean) w_.line("vdiv v{}, v{}, v{}", acc, acc, v);
      w_.line("{} v{}, m1, s{}, {}, 0", store_mnemonic(spec_.out_dtype), acc, vm, int64_t{i} * kLanes * dtype_bytes(spec_.out_dtype));
    }
    const int ebo = dtype_bytes(spec_.out_dtype);
    w_.line("sarg s{}, 1", hb);
    w_.add_scaled(hb, col0, ebo, t);
    w_.line("smuli s{}, s{}, {}", t, cols, ebo);
    w_.line("sli s{}, 1", one);
    w_.dma_to_hbm(1, kSemOut, {.vmem = vm, .hbm = hb, .rows = one, .row_bytes = t, .vmem_stride = t, .hbm_stride = t});
    w_.line("sem.wait sem{}, 1", kSemOut);  // the out buffer is reused by the next strip
    for (int r : {vm, hb, t, one}) s.release(r);
  }

  const ColumnReduceSpec& spec_;
  AsmWriter w_;
  RegisterPool vregs_{"vector registers", 0, 31};
  int g_ = 1, eb_ = 4, acc_ = -1, identity_ = -1, row_blocks_ = -1;
  int64_t width_ = kLanes, br_ = kSublanes;
  uint64_t in_[2] = {0, 0}, out_ = 0;
};

void validate(const ColumnReduceSpec& spec) {
  if (spec.op != RowOp::Sum && spec.op != RowOp::Mean && spec.op != RowOp::Max && spec.op != RowOp::Min) {
    throw KernelError(fmt::format("column reduce: {} is not a sum, mean, max or min", row_op_name(spec.op)));
  }
  for (DType t : {spec.in_dtype, spec.out_dtype}) {
    if (!dtype_is_float(t)) throw KernelError(fmt::format("column reduce: {} (f32, bf16 or f16)", dtype_name(t)));
  }
  if (spec.cols < 1) throw KernelError("column reduce: no columns");
}

}  // namespace

std::vector<int32_t> column_reduce_scalars(const ColumnReduceSpec& spec, int64_t rows, int64_t cols) {
  validate(spec);
  if (rows < 1 || cols < 1 || rows * cols >= (int64_t{1} << 31)) {
    throw KernelError(fmt::format("column reduce: a launch of {} x {} elements", rows, cols));
  }
  return {int32_t(rows), int32_t(cols)};
}

isa::Program make_column_reduce(const ColumnReduceSpec& spec, const sim::ChipConfig& chip) {
  validate(spec);
  return ColumnReduceWriter(spec, chip).write();
}

}  // namespace vtpu::kernels
