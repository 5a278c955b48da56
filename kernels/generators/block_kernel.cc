// The grid loop of a block kernel and the pipeline Pallas emits around its body: each input's
// next block is fetched into its second buffer while the body runs on the first (and not fetched
// at all when the next step reads the same block); each output's block is written back when the
// next step moves to another block (or the grid ends), so a body may accumulate into an output
// over consecutive steps, as Pallas's reduction-axis idiom does.
#include "kernels/generators/block_kernel.h"

#include <fmt/format.h>

#include "kernels/codegen/kernel_error.h"
#include "kernels/codegen/operand.h"
#include "kernels/generators/block_kernel_body.h"

namespace vtpu::kernels {
namespace {

void validate(const BlockKernelSpec& spec) {
  const auto fail = [&](const std::string& what) { fail_block_kernel(spec, what); };
  if (spec.grid.size() > kMaxBlockGrid) fail(fmt::format("a grid of {} dims (at most {})", spec.grid.size(), kMaxBlockGrid));
  for (int64_t g : spec.grid) {
    if (g < 1) fail("every grid dim must be at least 1");
  }
  for (const BlockRef& r : spec.refs) {
    if (r.dtype != DType::F32 && r.dtype != DType::BF16 && r.dtype != DType::I32) {
      fail(fmt::format("blocks of {} (kernels take float32, bfloat16 or int32)", dtype_name(r.dtype)));
    }
    // A one-row block is a row vector (read by every sublane); a one-column scratch block a
    // row statistic, or of one row a number (block_kernel_body.h).
    const bool row_vector = r.block_rows == 1 && r.block_cols % 128 == 0;
    const bool column_vector =
        r.kind == BlockRef::Kind::Scratch && r.block_cols == 1 && (r.block_rows % 8 == 0 || r.block_rows == 1);
    if (!row_vector && !column_vector && (r.block_rows % 8 || r.block_cols % 128)) {
      fail(fmt::format("block shape ({}, {}): blocks are whole 8 x 128 tiles (or one row of them)", r.block_rows,
                       r.block_cols));
    }
    if (r.in_hbm) continue;  // no blocks
    if (is_streamed(r) && (r.rows % r.block_rows || r.cols % r.block_cols)) {
      fail(fmt::format("array ({}, {}) is not a whole number of ({}, {}) blocks", r.rows, r.cols, r.block_rows, r.block_cols));
    }
  }
}

// s`dst` = the block index along `dim` of ref `r` at the grid point in `ids`.
void block_index(AsmWriter& w, const BlockLayout& l, const BlockRef& r, int dim, const std::vector<int>& ids, int dst,
                 int scratch) {
  load_affine(w, l, r.index[dim], ids, dst, scratch);
}

// One 2-D DMA of ref `i`'s block (row index s`row`, column index s`col`) between HBM and the
// VMEM address in s`vmem`.
void move_block(AsmWriter& w, const BlockKernelSpec& spec, const BlockLayout& l, int i, bool to_vmem, int vmem, int row,
                int col) {
  const BlockRef& r = spec.refs[i];
  auto& s = w.sregs();
  const int elt = dtype_bytes(r.dtype);
  const int hbm = s.take(), rows = s.take(), bytes = s.take(), stride = s.take(), scratch = s.take();
  load_array_base(w, l, i, hbm);
  w.add_scaled(hbm, row, r.block_rows * r.cols * elt, scratch);
  w.add_scaled(hbm, col, r.block_cols * elt, scratch);
  w.load_immediate(rows, r.block_rows);
  w.load_immediate(bytes, r.block_cols * elt);
  w.load_immediate(stride, r.cols * elt);
  w.dma(to_vmem, l.queue[i], l.sem[i], {vmem, hbm, rows, bytes, bytes, stride});
  for (int reg : {hbm, rows, bytes, stride, scratch}) s.release(reg);
}

// s`dst` = ref `i`'s buffer other than the one at the VMEM address in s`current` (slot0 + slot1 -
// current), through s`scratch`; `dst` may be `current`.
void other_buffer(AsmWriter& w, const BlockLayout& l, int i, int current, int dst, int scratch) {
  w.load_immediate(scratch, l.slot0[i] + l.slot1[i]);
  w.line("ssub s{}, s{}, s{}", dst, scratch, current);
}

// The first step's input DMAs and every streamed ref's starting state.
void emit_prologue(AsmWriter& w, const BlockKernelSpec& spec, const BlockLayout& l, const std::vector<int>& ids) {
  auto& s = w.sregs();
  const int base = s.take(), row = s.take(), col = s.take(), scratch = s.take();
  for (size_t i = 0; i < spec.refs.size(); ++i) {
    const BlockRef& r = spec.refs[i];
    if (!is_streamed(r)) continue;
    w.load_immediate(base, l.slot0[i]);
    w.line("sargw {}, s{}", l.base_slot[i], base);
    block_index(w, l, r, 0, ids, row, scratch);
    block_index(w, l, r, 1, ids, col, scratch);
    w.line("sargw {}, s{}", l.index_slot[i], row);
    w.line("sargw {}, s{}", l.index_slot[i] + 1, col);
    w.load_immediate(scratch, r.kind == BlockRef::Kind::Input ? 1 : 0);
    w.line("sargw {}, s{}", l.count_slot[i], scratch);
    if (r.kind == BlockRef::Kind::Input) {
      w.line("sargw {}, s{}", l.next_slot[i], base);
      move_block(w, spec, l, static_cast<int>(i), true, base, row, col);
    }
  }
  for (int reg : {base, row, col, scratch}) s.release(reg);
}

// s`next`[...] = the grid point after s`ids`[...] (the last dim fastest).
void next_point(AsmWriter& w, const BlockKernelSpec& spec, const std::vector<int>& ids, const std::vector<int>& next) {
  auto& s = w.sregs();
  const std::string done = w.new_label("next_done");
  const int limit = s.take();
  for (size_t g = 0; g < ids.size(); ++g) w.line("smov s{}, s{}", next[g], ids[g]);
  for (size_t g = ids.size(); g-- > 0;) {
    w.line("saddi s{}, s{}, 1", next[g], next[g]);
    w.load_immediate(limit, spec.grid[g]);
    w.line("blt s{}, s{}, {}", next[g], limit, done);
    w.line("sli s{}, 0", next[g]);  // carry into the dim before
  }
  w.place(done);
  s.release(limit);
}

// Waits for this step's input blocks, then fetches the next step's where they change.
void emit_inputs(AsmWriter& w, const BlockKernelSpec& spec, const BlockLayout& l, const std::vector<int>& next,
                 int has_next) {
  auto& s = w.sregs();
  const int count = s.take(), row = s.take(), col = s.take(), old = s.take(), scratch = s.take();
  for (size_t i = 0; i < spec.refs.size(); ++i) {
    if (!is_streamed(spec.refs[i], BlockRef::Kind::Input)) continue;
    const std::string landed = w.new_label("landed");
    w.line("sarg s{}, {}", count, l.count_slot[i]);
    w.line("beq s{}, s0, {}", count, landed);
    w.line("sem.wait sem{}, 1", l.sem[i]);
    w.line("sargw {}, s0", l.count_slot[i]);
    w.place(landed);
  }
  const std::string no_next = w.new_label("no_prefetch");
  w.line("beq s{}, s0, {}", has_next, no_next);
  for (size_t i = 0; i < spec.refs.size(); ++i) {
    const BlockRef& r = spec.refs[i];
    if (!is_streamed(r, BlockRef::Kind::Input)) continue;
    const std::string fetch = w.new_label("fetch"), same = w.new_label("same_block");
    block_index(w, l, r, 0, next, row, scratch);
    block_index(w, l, r, 1, next, col, scratch);
    w.line("sarg s{}, {}", old, l.index_slot[i]);
    w.line("bne s{}, s{}, {}", row, old, fetch);
    w.line("sarg s{}, {}", old, l.index_slot[i] + 1);
    w.line("beq s{}, s{}, {}", col, old, same);
    w.place(fetch);
    w.line("sargw {}, s{}", l.index_slot[i], row);
    w.line("sargw {}, s{}", l.index_slot[i] + 1, col);
    w.line("sarg s{}, {}", old, l.base_slot[i]);
    other_buffer(w, l, static_cast<int>(i), old, old, scratch);
    w.line("sargw {}, s{}", l.next_slot[i], old);
    w.load_immediate(scratch, 1);
    w.line("sargw {}, s{}", l.count_slot[i], scratch);
    move_block(w, spec, l, static_cast<int>(i), true, old, row, col);
    w.place(same);
  }
  w.place(no_next);
  for (int reg : {count, row, col, old, scratch}) s.release(reg);
}

// Writes back each output block the next step leaves (all of them after the last step) and
// switches it to its other buffer, first waiting for that buffer's own write-back.
void emit_outputs(AsmWriter& w, const BlockKernelSpec& spec, const BlockLayout& l, const std::vector<int>& next,
                  int has_next) {
  auto& s = w.sregs();
  const int row = s.take(), col = s.take(), old_row = s.take(), old_col = s.take(), base = s.take(), scratch = s.take();
  for (size_t i = 0; i < spec.refs.size(); ++i) {
    const BlockRef& r = spec.refs[i];
    if (!is_streamed(r, BlockRef::Kind::Output)) continue;
    const std::string write = w.new_label("write_back"), stay = w.new_label("stay"), free = w.new_label("buffer_free");
    w.line("sarg s{}, {}", old_row, l.index_slot[i]);
    w.line("sarg s{}, {}", old_col, l.index_slot[i] + 1);
    w.line("beq s{}, s0, {}", has_next, write);
    block_index(w, l, r, 0, next, row, scratch);
    block_index(w, l, r, 1, next, col, scratch);
    w.line("bne s{}, s{}, {}", row, old_row, write);
    w.line("beq s{}, s{}, {}", col, old_col, stay);
    w.place(write);
    w.line("sarg s{}, {}", base, l.base_slot[i]);
    move_block(w, spec, l, static_cast<int>(i), false, base, old_row, old_col);
    other_buffer(w, l, static_cast<int>(i), base, base, scratch);
    w.line("sargw {}, s{}", l.base_slot[i], base);
    w.line("sargw {}, s{}", l.index_slot[i], row);
    w.line("sargw {}, s{}", l.index_slot[i] + 1, col);
    w.line("sarg s{}, {}", base, l.count_slot[i]);
    w.line("saddi s{}, s{}, 1", base, base);
    w.load_immediate(scratch, 2);
    w.line("blt s{}, s{}, {}", base, scratch, free);
    w.line("sem.wait sem{}, 1", l.sem[i]);  // one queue: write-backs land in issue order
    w.line("saddi s{}, s{}, -1", base, base);
    w.place(free);
    w.line("sargw {}, s{}", l.count_slot[i], base);
    w.place(stay);
  }
  for (int reg : {row, col, old_row, old_col, base, scratch}) s.release(reg);
}

void emit_epilogue(AsmWriter& w, const BlockKernelSpec& spec, const BlockLayout& l) {
  auto& s = w.sregs();
  const int count = s.take();
  for (size_t i = 0; i < spec.refs.size(); ++i) {
    if (!is_streamed(spec.refs[i], BlockRef::Kind::Output)) continue;
    const std::string done = w.new_label("drained");
    w.line("sarg s{}, {}", count, l.count_slot[i]);
    for (int k = 0; k < 2; ++k) {
      w.line("beq s{}, s0, {}", count, done);
      w.line("sem.wait sem{}, 1", l.sem[i]);
      w.line("saddi s{}, s{}, -1", count, count);
    }
    w.place(done);
  }
  s.release(count);
}

}  // namespace

std::string make_block_kernel_source(const BlockKernelSpec& spec, const sim::ChipConfig& chip) {
  validate(spec);
  AsmWriter w(spec.name);
  w.target_mxu(chip.mxu_dim);
  const BlockLayout l = lay_out_block_kernel(w, spec, chip);
  auto& s = w.sregs();
  std::vector<int> ids, next;
  for (size_t g = 0; g < spec.grid.size(); ++g) ids.push_back(s.take());
  for (size_t g = 0; g < spec.grid.size(); ++g) next.push_back(s.take());
  const int step = s.take(), has_next = s.take(), steps = s.take();
  int64_t total = 1;
  for (int64_t g : spec.grid) total *= g;
  for (int id : ids) w.line("sli s{}, 0", id);
  w.line("sli s{}, 0", step);
  emit_table_copies(w, spec, l);
  emit_prologue(w, spec, l, ids);
  const std::string loop = w.new_label("grid_step");
  w.place(loop);
  w.comment("grid step: wait for this step's inputs, fetch the next step's, run the body, write back");
  w.line("mark s{}", step);  // the step's number: traces draw each step, errors name it
  w.line("saddi s{}, s{}, 1", step, step);
  w.load_immediate(steps, total);
  w.line("sslt s{}, s{}, s{}", has_next, step, steps);
  next_point(w, spec, ids, next);
  emit_inputs(w, spec, l, next, has_next);
  emit_block_body(w, spec, l, chip, ids);
  emit_outputs(w, spec, l, next, has_next);
  for (size_t i = 0; i < spec.refs.size(); ++i) {
    if (!is_streamed(spec.refs[i], BlockRef::Kind::Input)) continue;
    const int base = s.take();
    w.line("sarg s{}, {}", base, l.next_slot[i]);
    w.line("sargw {}, s{}", l.base_slot[i], base);
    s.release(base);
  }
  for (size_t g = 0; g < ids.size(); ++g) w.line("smov s{}, s{}", ids[g], next[g]);
  w.line("bne s{}, s0, {}", has_next, loop);
  emit_epilogue(w, spec, l);
  return w.source();
}

}  // namespace vtpu::kernels
