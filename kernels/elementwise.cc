// Schedule: blocks of BR rows x BC cols in row-major block order. The loop body is emitted twice
// (buffer set 0 and 1), because semaphores are immediates: set s waits on sem s for its inputs
// and on sem 2+s for the write-back of the block that used the set before. Block b+1's inputs
// are issued before block b computes, so DMA overlaps compute. Padding lanes and sublanes of a
// ragged block compute garbage that is never written back (only the valid region is DMA'd out).
#include "kernels/elementwise.h"

#include <algorithm>

#include "kernels/asm_writer.h"

namespace vtpu::kernels {
namespace {

constexpr int kLanes = 128;
constexpr int kSublanes = 8;
constexpr uint64_t kBlockBudgetBytes = 256 * 1024;  // VMEM per buffer set: big DMAs, short pipeline fill
constexpr int64_t kMaxBlockCols = 2048;
constexpr int kSemInput = 0, kSemOutput = 2, kSemPrologue = 4;

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

struct Buffer {
  bool streamed = false;  // DMA'd per block (not Scalar)
  Layout layout = Layout::Full;
  DType dtype = DType::F32;
  int eb = 4;
  int arg = 0;                 // kernel argument index
  uint64_t vmem[2] = {0, 0};   // per buffer set
  int64_t vmem_stride = 0;     // bytes between rows in VMEM (Full)
  int rowbase = -1, cursor = -1;  // scalar registers during compute
  int preset_vreg = -1;        // Scalar inputs: loaded once
};

class ElementwiseBuilder {
 public:
  ElementwiseBuilder(const ElementwiseSpec& spec, const sim::ChipConfig& chip) : spec_(spec), chip_(chip), w_("elementwise") {}

  isa::Program build() {
    validate();
    plan_blocks();
    layout_vmem();
    emit();
    return w_.assemble();
  }

 private:
  void validate() {
    if (spec_.rows < 1 || spec_.cols < 1) throw KernelError("elementwise: empty tensors need no kernel");
    if (spec_.rows * spec_.cols >= (int64_t{1} << 31)) throw KernelError("elementwise: tensor too large for one launch");
    if (spec_.expr.outputs().size() != spec_.outputs.size()) {
      throw KernelError("elementwise: the expression's outputs and the output dtypes differ in number");
    }
    if (spec_.expr.operand_count() > static_cast<int>(spec_.inputs.size())) {
      throw KernelError("elementwise: the expression reads an operand that has no input");
    }
    for (const auto& in : spec_.inputs) {
      if (!dtype_on_chip(in.dtype)) throw KernelError(fmt::format("elementwise: {} is not supported on the chip", dtype_name(in.dtype)));
    }
    for (DType out : spec_.outputs) {
      if (!dtype_on_chip(out)) throw KernelError(fmt::format("elementwise: {} is not supported on the chip", dtype_name(out)));
    }
    if (spec_.outputs.empty()) throw KernelError("elementwise: a kernel without outputs does nothing");
    if (spec_.inputs.size() + spec_.outputs.size() > 10) {
      throw KernelError("elementwise: more than 10 operands in one kernel (split the fusion group)");
    }
  }

  void plan_blocks() {
    bc_ = std::min(spec_.cols, kMaxBlockCols);
    bc_pad_ = round_up(bc_, kLanes);
    int64_t bytes_per_row = 0;
    for (const auto& in : spec_.inputs) {
      if (in.layout == Layout::Full) bytes_per_row += bc_pad_ * dtype_bytes(in.dtype);
    }
    for (DType out : spec_.outputs) bytes_per_row += bc_pad_ * dtype_bytes(out);
    br_ = std::max<int64_t>(kSublanes, int64_t(kBlockBudgetBytes) / std::max<int64_t>(bytes_per_row, 1) / kSublanes * kSublanes);
    br_ = std::min(br_, round_up(spec_.rows, kSublanes));
    col_blocks_ = (spec_.cols + bc_ - 1) / bc_;
    blocks_ = ((spec_.rows + br_ - 1) / br_) * col_blocks_;
  }

  void layout_vmem() {
    uint64_t next = 0;
    const auto place = [&](uint64_t bytes) {
      const uint64_t at = next;
      next += round_up(static_cast<int64_t>(bytes), 512);
      return at;
    };
    const auto add = [&](Layout layout, DType dtype, const char* stem, size_t index) {
      Buffer b;
      b.layout = layout;
      b.dtype = dtype;
      b.eb = dtype_bytes(dtype);
      b.arg = w_.argument(fmt::format("{}{}", stem, index), isa::ArgumentKind::Buffer);
      b.streamed = layout != Layout::Scalar;
      const int64_t pad = int64_t{kLanes} * b.eb;  // room for a full-width read past the end
      uint64_t bytes = 0;
      if (layout == Layout::Full) bytes = br_ * bc_pad_ * b.eb;
      else if (layout == Layout::Row) bytes = bc_pad_ * b.eb;
      else if (layout == Layout::Column) bytes = br_ * b.eb + pad;
      else bytes = pad;
      b.vmem_stride = bc_pad_ * b.eb;
      b.vmem[0] = place(bytes);
      b.vmem[1] = b.streamed ? place(bytes) : b.vmem[0];
      buffers_.push_back(b);
    };
    for (size_t i = 0; i < spec_.inputs.size(); ++i) add(spec_.inputs[i].layout, spec_.inputs[i].dtype, "in", i);
    for (size_t i = 0; i < spec_.outputs.size(); ++i) add(Layout::Full, spec_.outputs[i], "out", i);
    if (next > chip_.vmem_bytes) throw KernelError(fmt::format("elementwise: needs {} bytes of VMEM, the chip has {}", next, chip_.vmem_bytes));
  }

  Buffer& output(size_t i) { return buffers_[spec_.inputs.size() + i]; }

  // Rows and columns of block `block_reg` into (r0, c0, nrows, ncols) registers.
  void block_extent(int block_reg, int r0, int c0, int nrows, int ncols) {
    auto& s = w_.sregs();
    const int t = s.take();
    w_.load_immediate(t, col_blocks_);
    w_.line("sdiv s{}, s{}, s{}", r0, block_reg, t);
    w_.line("srem s{}, s{}, s{}", c0, block_reg, t);
    w_.line("smuli s{}, s{}, {}", r0, r0, br_);
    w_.line("smuli s{}, s{}, {}", c0, c0, bc_);
    w_.load_immediate(t, spec_.rows);
    w_.line("ssub s{}, s{}, s{}", nrows, t, r0);
    w_.load_immediate(t, br_);
    w_.line("smin s{}, s{}, s{}", nrows, nrows, t);
    w_.load_immediate(t, spec_.cols);
    w_.line("ssub s{}, s{}, s{}", ncols, t, c0);
    w_.load_immediate(t, bc_);
    w_.line("smin s{}, s{}, s{}", ncols, ncols, t);
    s.release(t);
  }

  // One 2-D DMA between `b`'s VMEM buffer of `set` and HBM for the block in (r0, c0, nrows, ncols).
  void block_dma(const Buffer& b, int set, bool to_vmem, int sem, int r0, int c0, int nrows, int ncols) {
    auto& s = w_.sregs();
    const int vm = s.take(), hb = s.take(), rows = s.take(), row_bytes = s.take(), vstride = s.take(), hstride = s.take();
    w_.load_immediate(vm, b.vmem[set]);
    w_.line("sarg s{}, {}", hb, b.arg);
    if (b.layout == Layout::Full) {
      w_.load_immediate(rows, spec_.cols);  // hbm offset = (r0 * cols + c0) * eb
      w_.line("smul s{}, s{}, s{}", rows, rows, r0);
      w_.line("sadd s{}, s{}, s{}", rows, rows, c0);
      w_.line("smuli s{}, s{}, {}", rows, rows, b.eb);
      w_.line("sadd s{}, s{}, s{}", hb, hb, rows);
      w_.line("smov s{}, s{}", rows, nrows);
      w_.line("smuli s{}, s{}, {}", row_bytes, ncols, b.eb);
      w_.load_immediate(vstride, b.vmem_stride);
      w_.load_immediate(hstride, spec_.cols * b.eb);
    } else {
      const int offset = b.layout == Layout::Row ? c0 : r0;
      const int count = b.layout == Layout::Row ? ncols : nrows;
      w_.line("smuli s{}, s{}, {}", rows, offset, b.eb);
      w_.line("sadd s{}, s{}, s{}", hb, hb, rows);
      w_.load_immediate(rows, 1);
      w_.line("smuli s{}, s{}, {}", row_bytes, count, b.eb);
      w_.line("smov s{}, s{}", vstride, row_bytes);
      w_.line("smov s{}, s{}", hstride, row_bytes);
    }
    w_.line("{} dq{}, sem{}, s{}, s{}, s{}, s{}, s{}, s{}", to_vmem ? "dma.h2v" : "dma.v2h", to_vmem ? 0 : 1, sem,
            vm, hb, rows, row_bytes, vstride, hstride);
    for (int r : {vm, hb, rows, row_bytes, vstride, hstride}) s.release(r);
  }

  void issue_inputs(int block_reg, int set) {
    auto& s = w_.sregs();
    const int r0 = s.take(), c0 = s.take(), nr = s.take(), nc = s.take();
    block_extent(block_reg, r0, c0, nr, nc);
    for (size_t i = 0; i < spec_.inputs.size(); ++i) {
      if (buffers_[i].streamed) block_dma(buffers_[i], set, true, kSemInput + set, r0, c0, nr, nc);
    }
    for (int r : {r0, c0, nr, nc}) s.release(r);
  }

  int streamed_inputs() const {
    int n = 0;
    for (size_t i = 0; i < spec_.inputs.size(); ++i) n += buffers_[i].streamed;
    return n;
  }

  void load_scalars(RegisterPool& vregs) {
    auto& s = w_.sregs();
    for (size_t i = 0; i < spec_.inputs.size(); ++i) {
      Buffer& b = buffers_[i];
      if (b.streamed) continue;
      const int vm = s.take(), hb = s.take(), one = s.take(), bytes = s.take();
      w_.load_immediate(vm, b.vmem[0]);
      w_.line("sarg s{}, {}", hb, b.arg);
      w_.load_immediate(one, 1);
      w_.load_immediate(bytes, b.eb);
      w_.line("dma.h2v dq0, sem{}, s{}, s{}, s{}, s{}, s{}, s{}", kSemPrologue, vm, hb, one, bytes, bytes, bytes);
      w_.line("sem.wait sem{}, 1", kSemPrologue);
      b.preset_vreg = vregs.take();
      w_.line("vmaskn m1, s{}", one);  // lane 0 of sublane 0 only: nothing past the element is read
      w_.line("{} v{}, m1, s{}, 0, 0", load_mnemonic(b.dtype), b.preset_vreg, vm);
      w_.line("vbcast.sub v{}, v{}, 0", b.preset_vreg, b.preset_vreg);
      w_.line("vbcast.lane v{}, v{}, 0", b.preset_vreg, b.preset_vreg);
      for (int r : {vm, hb, one, bytes}) s.release(r);
    }
  }

  void compute_block(int block_reg, int set, RegisterPool& vregs, RegisterPool& masks) {
    auto& s = w_.sregs();
    const int r0 = s.take(), c0 = s.take(), nr = s.take(), nc = s.take();
    block_extent(block_reg, r0, c0, nr, nc);
    const int groups = s.take(), chunks = s.take(), g = s.take(), c = s.take();
    w_.line("saddi s{}, s{}, 7", groups, nr);
    w_.line("sshri s{}, s{}, 3", groups, groups);
    w_.line("saddi s{}, s{}, 127", chunks, nc);
    w_.line("sshri s{}, s{}, 7", chunks, chunks);
    for (auto& b : buffers_) {
      if (!b.streamed) continue;
      b.rowbase = s.take();
      w_.load_immediate(b.rowbase, b.vmem[set]);
      if (b.layout != Layout::Column) b.cursor = s.take();
    }
    const std::string group_loop = w_.new_label("group"), chunk_loop = w_.new_label("chunk");
    w_.line("sli s{}, 0", g);
    w_.place(group_loop);
    for (auto& b : buffers_) {
      if (b.cursor >= 0) w_.line("smov s{}, s{}", b.cursor, b.rowbase);
    }
    w_.line("sli s{}, 0", c);
    w_.place(chunk_loop);
    const int scratch = s.take();
    TileCodegen codegen(w_, vregs, masks, scratch);
    std::vector<std::pair<int, TileValue>> preset;
    for (size_t i = 0; i < spec_.inputs.size(); ++i) {
      if (buffers_[i].preset_vreg >= 0) preset.push_back({static_cast<int>(i), {register_type(buffers_[i].dtype), buffers_[i].preset_vreg}});
    }
    const auto load = [&](int operand, int vreg) {
      const Buffer& b = buffers_.at(operand);
      const char* m = load_mnemonic(b.dtype);
      if (b.layout == Layout::Full) w_.line("{} v{}, m0, s{}, 0, {}", m, vreg, b.cursor, b.vmem_stride);
      else if (b.layout == Layout::Row) w_.line("{} v{}, m0, s{}, 0, 0", m, vreg, b.cursor);
      else {
        w_.line("{} v{}, m0, s{}, 0, {}", m, vreg, b.rowbase, b.eb);
        w_.line("vbcast.lane v{}, v{}, 0", vreg, vreg);
      }
    };
    const std::vector<TileValue> results = codegen.emit(spec_.expr, load, preset);
    for (size_t i = 0; i < results.size(); ++i) {
      const Buffer& b = output(i);
      // Bool stores 0/1 bytes: any value goes through a mask first. int8 keeps the low byte (torch wraps).
      const TileValue as_mask = b.dtype == DType::Bool ? codegen.to_type(results[i], ValueType::Mask, false) : results[i];
      const TileValue v = codegen.to_type(as_mask, register_type(b.dtype), false);
      w_.line("{} v{}, m0, s{}, 0, {}", store_mnemonic(b.dtype), v.reg, b.cursor, b.vmem_stride);
      if (v.reg != as_mask.reg || v.type != as_mask.type) codegen.release(v);
      if (as_mask.reg != results[i].reg || as_mask.type != results[i].type) codegen.release(as_mask);
    }
    for (size_t i = 0; i < results.size(); ++i) {
      bool seen = false;  // the same node may be two outputs
      for (size_t j = 0; j < i; ++j) seen |= results[j].reg == results[i].reg && results[j].type == results[i].type;
      if (!seen) codegen.release(results[i]);
    }
    s.release(scratch);
    for (auto& b : buffers_) {
      if (b.cursor >= 0) w_.line("saddi s{}, s{}, {}", b.cursor, b.cursor, kLanes * b.eb);
    }
    w_.line("saddi s{}, s{}, 1", c, c);
    w_.line("blt s{}, s{}, {}", c, chunks, chunk_loop);
    for (auto& b : buffers_) {
      if (b.layout == Layout::Full) w_.line("saddi s{}, s{}, {}", b.rowbase, b.rowbase, kSublanes * b.vmem_stride);
      if (b.layout == Layout::Column) w_.line("saddi s{}, s{}, {}", b.rowbase, b.rowbase, kSublanes * b.eb);
    }
    w_.line("saddi s{}, s{}, 1", g, g);
    w_.line("blt s{}, s{}, {}", g, groups, group_loop);
    for (auto& b : buffers_) {
      if (b.rowbase >= 0) s.release(b.rowbase);
      if (b.cursor >= 0) s.release(b.cursor);
      b.rowbase = b.cursor = -1;
    }
    for (size_t i = 0; i < spec_.outputs.size(); ++i) block_dma(output(i), set, false, kSemOutput + set, r0, c0, nr, nc);
    for (int r : {r0, c0, nr, nc, groups, chunks, g, c}) s.release(r);
  }

  void emit() {
    auto& s = w_.sregs();
    RegisterPool vregs("vector registers", 0, 31), masks("mask registers", 1, 7);
    load_scalars(vregs);
    const int block = s.take(), next = s.take(), nblocks = s.take(), two = s.take();
    w_.load_immediate(nblocks, blocks_);
    w_.load_immediate(two, 2);
    w_.line("sli s{}, 0", block);
    issue_inputs(block, 0);
    const std::string top = w_.new_label("block"), done = w_.new_label("done");
    w_.place(top);
    for (int set = 0; set < 2; ++set) {
      const std::string no_prefetch = w_.new_label("no_prefetch"), out_free = w_.new_label("out_free");
      w_.line("saddi s{}, s{}, 1", next, block);
      w_.line("bge s{}, s{}, {}", next, nblocks, no_prefetch);
      issue_inputs(next, 1 - set);
      w_.place(no_prefetch);
      if (streamed_inputs() > 0) w_.line("sem.wait sem{}, {}", kSemInput + set, streamed_inputs());
      w_.line("blt s{}, s{}, {}", block, two, out_free);  // the set's previous write-back must have landed
      w_.line("sem.wait sem{}, {}", kSemOutput + set, spec_.outputs.size());
      w_.place(out_free);
      compute_block(block, set, vregs, masks);
      w_.line("smov s{}, s{}", block, next);
      w_.line("bge s{}, s{}, {}", block, nblocks, done);
    }
    w_.line("jmp {}", top);
    w_.place(done);
  }

  const ElementwiseSpec& spec_;
  const sim::ChipConfig& chip_;
  AsmWriter w_;
  std::vector<Buffer> buffers_;
  int64_t br_ = 0, bc_ = 0, bc_pad_ = 0, col_blocks_ = 0, blocks_ = 0;
};

}  // namespace

ValueType register_type(DType dtype) {
  return dtype == DType::F32 || dtype == DType::BF16 ? ValueType::F32 : ValueType::I32;
}

const char* load_mnemonic(DType dtype) {
  switch (dtype_bytes(dtype)) {
    case 2: return "vld.bf16";
    case 1: return "vld.i8";
    default: return "vld";
  }
}

const char* store_mnemonic(DType dtype) {
  switch (dtype_bytes(dtype)) {
    case 2: return "vst.bf16";
    case 1: return "vst.i8";
    default: return "vst";
  }
}

isa::Program make_elementwise(const ElementwiseSpec& spec, const sim::ChipConfig& chip) {
  return ElementwiseBuilder(spec, chip).build();
}

}  // namespace vtpu::kernels
