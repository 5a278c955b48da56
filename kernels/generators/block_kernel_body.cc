// A block kernel's VMEM layout and its body, lowered statement by statement: elementwise
// assignments through TileCodegen tile by tile, slices, copies and waits (dots: block_kernel_dot.cc;
// reductions: block_kernel_reductions.cc). Each statement runs under its `pl.when`
// conditions.
#include "kernels/generators/block_kernel_body.h"

#include <fmt/format.h>

#include <algorithm>

#include "kernels/codegen/kernel_error.h"
#include "kernels/codegen/operand.h"
#include "kernels/codegen/tile_codegen.h"
#include "kernels/codegen/vreg_shape.h"

namespace vtpu::kernels {
namespace {

constexpr int64_t kVmemAlign = 1024;
constexpr int kMaxAssignOperands = 6;  // two scalar registers each, beside the grid loop's
constexpr int kBodyQueue = 3;          // the body's own copies (the pipeline's inputs use 0 and 1, outputs 2)

std::string ref_name(const BlockKernelSpec& spec, int i) {
  const BlockRef& r = spec.refs[i];
  return fmt::format("{}{}", r.kind == BlockRef::Kind::Input ? "in" : r.kind == BlockRef::Kind::Output ? "out" : "scratch", i);
}

// Skips the statement unless every condition on the program ids holds.
void guard(AsmWriter& w, const BlockLayout& l, const BlockStatement& st, const std::vector<int>& ids,
           const std::string& skip) {
  auto& s = w.sregs();
  const int value = s.take(), scratch = s.take();
  for (const BlockCondition& c : st.when) {
    load_affine(w, l, c.affine, ids, value, scratch);
    w.line("{} s{}, s0, {}", c.equal ? "bne" : "beq", value, skip);
  }
  s.release(value);
  s.release(scratch);
}

// s`dst` = the address of a window's first element: in HBM (the argument's base) or in VMEM.
void window_address(AsmWriter& w, const BlockKernelSpec& spec, const BlockLayout& l, const BlockWindow& window,
                    const std::vector<int>& ids, int dst) {
  const BlockRef& r = spec.refs.at(window.ref);
  auto& s = w.sregs();
  const int index = s.take(), scratch = s.take();
  if (r.in_hbm) {
    load_array_base(w, l, window.ref, dst);
  } else {
    load_block_base(w, l, spec, window.ref, dst);
  }
  const int64_t elt = dtype_bytes(r.dtype);
  load_affine(w, l, window.row0, ids, index, scratch);
  w.add_scaled(dst, index, (r.in_hbm ? r.cols : stored_cols(r)) * elt, scratch);
  load_affine(w, l, window.col0, ids, index, scratch);
  w.add_scaled(dst, index, elt, scratch);
  s.release(index);
  s.release(scratch);
}

void emit_copy(AsmWriter& w, const BlockKernelSpec& spec, const BlockLayout& l, const BlockStatement& st,
               const std::vector<int>& ids) {
  const BlockRef& from = spec.refs.at(st.from.ref);
  const BlockRef& to = spec.refs.at(st.to.ref);
  if (from.in_hbm == to.in_hbm) fail_block_kernel(spec, "a copy moves data between HBM (memory_space=ANY) and VMEM");
  if (from.dtype != to.dtype) fail_block_kernel(spec, "a copy's two ends hold the same dtype");
  const bool to_vmem = from.in_hbm;
  const BlockRef& hbm = to_vmem ? from : to;
  const BlockRef& vmem = to_vmem ? to : from;
  auto& s = w.sregs();
  const int hbm_address = s.take(), vmem_address = s.take(), rows = s.take(), bytes = s.take(), vmem_stride = s.take(),
            hbm_stride = s.take();
  window_address(w, spec, l, to_vmem ? st.from : st.to, ids, hbm_address);
  window_address(w, spec, l, to_vmem ? st.to : st.from, ids, vmem_address);
  const int64_t elt = dtype_bytes(hbm.dtype);
  w.load_immediate(rows, st.rows);
  w.load_immediate(bytes, st.cols * elt);
  w.load_immediate(vmem_stride, row_stride_bytes(vmem));
  w.load_immediate(hbm_stride, hbm.cols * elt);
  w.dma(to_vmem, kBodyQueue, l.body_sem + st.semaphore, {vmem_address, hbm_address, rows, bytes, vmem_stride, hbm_stride});
  for (int reg : {hbm_address, vmem_address, rows, bytes, vmem_stride, hbm_stride}) s.release(reg);
}

// A window of one VMEM ref into a window of another, tile by tile: a row group of 8 rows and 128
// lanes per load and store (a one-row window: its row in every sublane, stored onto its row).
void emit_slice(AsmWriter& w, const BlockKernelSpec& spec, const BlockLayout& l, const BlockStatement& st,
                const std::vector<int>& ids) {
  const BlockRef& from = spec.refs.at(st.from.ref);
  const BlockRef& to = spec.refs.at(st.to.ref);
  if (from.in_hbm || to.in_hbm) {
    fail_block_kernel(spec, "a slice is a window of a VMEM block (copy windows of HBM arrays)");
  }
  if (from.dtype != to.dtype) fail_block_kernel(spec, "a slice's two ends hold the same dtype");
  if (st.cols % kLanes || (st.rows % kSublanes && st.rows != 1) || from.block_cols == 1 || to.block_cols == 1) {
    fail_block_kernel(spec, fmt::format("a slice of {} x {}: slices span whole 128-lane columns and 8-row groups "
                                        "(or one row)", st.rows, st.cols));
  }
  auto& s = w.sregs();
  const int src = s.take(), dst = s.take(), g = s.take(), c = s.take(), limit = s.take();
  const int64_t from_stride = st.rows == 1 ? 0 : row_stride_bytes(from);
  const int64_t to_stride = st.rows == 1 ? 0 : row_stride_bytes(to);
  const int64_t chunk_from = kLanes * dtype_bytes(from.dtype), chunk_to = kLanes * dtype_bytes(to.dtype);
  window_address(w, spec, l, st.from, ids, src);
  window_address(w, spec, l, st.to, ids, dst);
  const std::string group_loop = w.new_label("slice_rows"), chunk_loop = w.new_label("slice_cols");
  w.line("sli s{}, 0", g);
  w.place(group_loop);
  w.line("sli s{}, 0", c);
  w.place(chunk_loop);
  w.line("{} v0, m0, s{}, 0, {}", load_mnemonic(from.dtype), src, from_stride);
  w.line("{} v0, m0, s{}, 0, {}", store_mnemonic(to.dtype), dst, to_stride);
  w.line("saddi s{}, s{}, {}", src, src, chunk_from);
  w.line("saddi s{}, s{}, {}", dst, dst, chunk_to);
  w.line("saddi s{}, s{}, 1", c, c);
  w.load_immediate(limit, st.cols / kLanes);
  w.line("blt s{}, s{}, {}", c, limit, chunk_loop);
  // The next row group: 8 rows down, back to the window's first column.
  w.line("saddi s{}, s{}, {}", src, src, kSublanes * from_stride - st.cols / kLanes * chunk_from);
  w.line("saddi s{}, s{}, {}", dst, dst, kSublanes * to_stride - st.cols / kLanes * chunk_to);
  w.line("saddi s{}, s{}, 1", g, g);
  w.load_immediate(limit, st.rows == 1 ? 1 : st.rows / kSublanes);
  w.line("blt s{}, s{}, {}", g, limit, group_loop);
  for (int reg : {src, dst, g, c, limit}) s.release(reg);
}

// v`vreg` = each element's index along `dim` of the block, in the tile of row group s`group` and
// column chunk s`chunk` (through s`scratch`): viota's s * 128 + l split into the sublane or the
// lane, plus the tile's first row or column.
void emit_iota(AsmWriter& w, RegisterPool& vregs, int dim, int vreg, int group, int chunk, int scratch) {
  const int offset = vregs.take();
  w.line("viota v{}", vreg);
  if (dim == 0) {
    w.line("vshri v{}, v{}, 7", vreg, vreg);
  } else {
    w.load_immediate(scratch, kLanes - 1);
    w.line("vbcast v{}, s{}", offset, scratch);
    w.line("vand v{}, v{}, v{}", vreg, vreg, offset);
  }
  w.line("smuli s{}, s{}, {}", scratch, dim == 0 ? group : chunk, dim == 0 ? kSublanes : kLanes);
  w.line("vbcast v{}, s{}", offset, scratch);
  w.line("viadd v{}, v{}, v{}", vreg, vreg, offset);
  vregs.release(offset);
}

void emit_assign(AsmWriter& w, const BlockKernelSpec& spec, const BlockLayout& l, const BlockStatement& st,
                 const std::vector<int>& ids) {
  if (st.operands.size() > kMaxAssignOperands) {
    fail_block_kernel(spec, fmt::format("one statement reads {} blocks (at most {}): assign a part to a scratch buffer first",
                           st.operands.size(), kMaxAssignOperands));
  }
  const BlockRef& target = spec.refs[st.target];
  auto& s = w.sregs();
  std::vector<int> refs = st.operands;
  refs.push_back(st.target);  // the last "operand" is where the tile is stored
  std::vector<int> rowbase, cursor;
  for (int i : refs) {
    rowbase.push_back(s.take());
    load_block_base(w, l, spec, i, rowbase.back());
    cursor.push_back(spec.refs[i].block_cols == 1 ? -1 : s.take());
  }
  const int g = s.take(), c = s.take(), limit = s.take(), scratch = s.take();
  // This step's scalars (scalar-prefetch entries), broadcast into vregs once for all tiles.
  RegisterPool vregs("vector registers", 0, 31), masks("mask registers", 1, 7);
  std::vector<std::pair<int, TileValue>> preset;
  for (size_t k = 0; k < st.scalars.size(); ++k) {
    const int v = vregs.take();
    load_affine(w, l, st.scalars[k], ids, limit, scratch);
    w.line("vbcast v{}, s{}", v, limit);
    preset.push_back({static_cast<int>(st.operands.size() + k), {ValueType::I32, v}});
  }
  const std::string group_loop = w.new_label("rows"), chunk_loop = w.new_label("cols");
  w.line("sli s{}, 0", g);
  w.place(group_loop);
  for (size_t k = 0; k < refs.size(); ++k) {
    if (cursor[k] >= 0) w.line("smov s{}, s{}", cursor[k], rowbase[k]);
  }
  w.line("sli s{}, 0", c);
  w.place(chunk_loop);
  TileCodegen codegen(w, vregs, masks, scratch);
  const auto address = [&](size_t k) { return cursor[k] >= 0 ? cursor[k] : rowbase[k]; };
  const size_t first_iota = st.operands.size() + st.scalars.size();
  const auto results = codegen.emit(st.expr, [&](int operand, int vreg) {
    if (static_cast<size_t>(operand) >= first_iota) {  // the element's row or column in the block
      emit_iota(w, vregs, st.iotas.at(operand - first_iota), vreg, g, c, limit);
      return;
    }
    const BlockRef& r = spec.refs[refs[operand]];
    w.line("{} v{}, m0, s{}, 0, {}", load_mnemonic(r.dtype), vreg, address(operand), sublane_stride_bytes(r));
  }, preset);
  const TileValue v = codegen.to_type(results.at(0), register_type(target.dtype), false);
  w.line("{} v{}, m0, s{}, 0, {}", store_mnemonic(target.dtype), v.reg, address(refs.size() - 1),
         sublane_stride_bytes(target));
  for (size_t k = 0; k < refs.size(); ++k) {
    if (cursor[k] >= 0) w.line("saddi s{}, s{}, {}", cursor[k], cursor[k], kLanes * dtype_bytes(spec.refs[refs[k]].dtype));
  }
  w.line("saddi s{}, s{}, 1", c, c);
  w.load_immediate(limit, stored_cols(target) / kLanes);
  w.line("blt s{}, s{}, {}", c, limit, chunk_loop);
  for (size_t k = 0; k < refs.size(); ++k) {
    w.line("saddi s{}, s{}, {}", rowbase[k], rowbase[k], kSublanes * sublane_stride_bytes(spec.refs[refs[k]]));
  }
  w.line("saddi s{}, s{}, 1", g, g);
  w.load_immediate(limit, row_groups(target));
  w.line("blt s{}, s{}, {}", g, limit, group_loop);
  for (size_t k = 0; k < refs.size(); ++k) {
    s.release(rowbase[k]);
    if (cursor[k] >= 0) s.release(cursor[k]);
  }
  for (int reg : {g, c, limit, scratch}) s.release(reg);
}

}  // namespace

void fail_block_kernel(const BlockKernelSpec& spec, const std::string& what) {
  throw KernelError(fmt::format("kernel '{}': {}", spec.name, what));
}

BlockLayout lay_out_block_kernel(AsmWriter& w, const BlockKernelSpec& spec, const sim::ChipConfig& chip) {
  BlockLayout l;
  const size_t n = spec.refs.size();
  l.slot0.assign(n, 0);
  l.slot1.assign(n, 0);
  l.argument.assign(n, -1);
  l.argument_offset.assign(n, 0);
  int packed_argument = -1;
  int64_t packed_bytes = 0;
  l.sem.assign(n, -1);
  l.queue.assign(n, -1);
  int64_t at = 0;
  const auto take = [&](int64_t bytes) {
    const int64_t address = at;
    at += (bytes + kVmemAlign - 1) / kVmemAlign * kVmemAlign;
    return address;
  };
  int streamed = 0;
  for (size_t t = 0; t < spec.tables.size(); ++t) {  // scalar prefetch: the first arguments
    l.table_argument.push_back(w.argument(fmt::format("table{}", t), isa::ArgumentKind::Buffer));
    l.table_vmem.push_back(take(4 * spec.tables[t]));
  }
  for (size_t i = 0; i < n; ++i) {
    const BlockRef& r = spec.refs[i];
    if (is_argument(r)) {
      const bool packed = spec.packed_outputs && r.kind == BlockRef::Kind::Output;
      if (packed && packed_argument >= 0) {
        l.argument[i] = packed_argument;
        l.argument_offset[i] = packed_bytes;
      } else {
        l.argument[i] = w.argument(packed ? "outputs" : ref_name(spec, static_cast<int>(i)), isa::ArgumentKind::Buffer);
        if (packed) packed_argument = l.argument[i];
      }
      if (packed) packed_bytes += r.rows * r.cols * dtype_bytes(r.dtype);
    }
    if (r.in_hbm) continue;
    l.slot0[i] = take(block_bytes(r));
    l.slot1[i] = is_streamed(r) ? take(block_bytes(r)) : l.slot0[i];
    if (!is_streamed(r)) continue;
    l.sem[i] = streamed++;
    // Inputs alternate between two queues; outputs share a third, so write-backs land in order.
    l.queue[i] = r.kind == BlockRef::Kind::Input ? (l.sem[i] % 2) : 2;
  }
  l.body_sem = streamed;
  if (streamed + spec.semaphores + 1 > chip.semaphores) {
    fail_block_kernel(spec, fmt::format("{} streamed arrays and {} semaphores of its own (the chip has {} semaphores)", streamed,
                           spec.semaphores, chip.semaphores));
  }
  int64_t staging = 0;
  for (const BlockStatement& st : spec.body) {
    if (st.kind == BlockStatement::Kind::Dot && spec.refs.at(st.operands.at(1)).dtype == DType::F32) {
      const BlockRef& b = spec.refs[st.operands[1]];
      staging = std::max(staging, b.block_rows * b.block_cols * 2);
    }
  }
  l.staging = take(staging);
  l.bytes = at;
  if (static_cast<uint64_t>(l.bytes) > chip.vmem_bytes) {
    fail_block_kernel(spec, fmt::format("its blocks need {} bytes of VMEM ({} buffers, double-buffered where streamed); {} has {}",
                           l.bytes, n, chip.name, chip.vmem_bytes));
  }
  l.base_slot.assign(n, -1);
  l.next_slot.assign(n, -1);
  l.index_slot.assign(n, -1);
  l.count_slot.assign(n, -1);
  for (size_t i = 0; i < n; ++i) {
    if (!is_streamed(spec.refs[i])) continue;
    l.base_slot[i] = w.scratch_argument();
    l.index_slot[i] = w.scratch_argument();
    w.scratch_argument();  // the column index beside it
    l.count_slot[i] = w.scratch_argument();
    if (spec.refs[i].kind == BlockRef::Kind::Input) l.next_slot[i] = w.scratch_argument();
  }
  return l;
}

void load_affine(AsmWriter& w, const BlockLayout& l, const GridAffine& a, const std::vector<int>& ids, int dst,
                 int scratch) {
  w.load_immediate(dst, a.offset);
  for (size_t g = 0; g < ids.size(); ++g) {
    if (a.coef[g]) w.add_scaled(dst, ids[g], a.coef[g], scratch);
  }
  if (a.lookups.empty()) return;
  const int entry = w.sregs().take();
  for (const TableLookup& t : a.lookups) {
    w.load_immediate(entry, l.table_vmem.at(t.table) + 4 * t.offset);
    for (size_t g = 0; g < ids.size(); ++g) {
      if (t.coef[g]) w.add_scaled(entry, ids[g], 4 * t.coef[g], scratch);
    }
    w.line("sld s{}, s{}, 0", entry, entry);
    w.add_scaled(dst, entry, t.scale, scratch);
  }
  w.sregs().release(entry);
}

void emit_table_copies(AsmWriter& w, const BlockKernelSpec& spec, const BlockLayout& l) {
  if (spec.tables.empty()) return;
  auto& s = w.sregs();
  const int vmem = s.take(), hbm = s.take(), rows = s.take(), bytes = s.take();
  const int sem = l.body_sem + spec.semaphores;  // the tables' own, after the body's
  w.load_immediate(rows, 1);
  for (size_t t = 0; t < spec.tables.size(); ++t) {
    w.load_immediate(vmem, l.table_vmem[t]);
    w.line("sarg s{}, {}", hbm, l.table_argument[t]);
    w.load_immediate(bytes, 4 * spec.tables[t]);
    w.dma_to_vmem(kBodyQueue, sem, {vmem, hbm, rows, bytes, bytes, bytes});
  }
  w.line("sem.wait sem{}, {}", sem, spec.tables.size());
  for (int reg : {vmem, hbm, rows, bytes}) s.release(reg);
}

void load_array_base(AsmWriter& w, const BlockLayout& l, int i, int dst) {
  w.line("sarg s{}, {}", dst, l.argument[i]);
  if (l.argument_offset[i]) {
    const int scratch = w.sregs().take();
    w.load_immediate(scratch, l.argument_offset[i]);
    w.line("sadd s{}, s{}, s{}", dst, dst, scratch);
    w.sregs().release(scratch);
  }
}

void load_block_base(AsmWriter& w, const BlockLayout& l, const BlockKernelSpec& spec, int i, int dst) {
  if (spec.refs.at(i).in_hbm) fail_block_kernel(spec, fmt::format("{} is in HBM: the body reaches it through copies only", ref_name(spec, i)));
  if (is_streamed(spec.refs.at(i))) {
    w.line("sarg s{}, {}", dst, l.base_slot[i]);
  } else {
    w.load_immediate(dst, l.slot0[i]);
  }
}

void emit_block_body(AsmWriter& w, const BlockKernelSpec& spec, const BlockLayout& l, const sim::ChipConfig& chip,
                     const std::vector<int>& program_ids) {
  for (size_t k = 0; k < spec.body.size(); ++k) {
    const BlockStatement& st = spec.body[k];
    // The front end maps an instruction back to the body's line by these two comments.
    w.comment(fmt::format("statement {}", k));
    const std::string skip = w.new_label("skip");
    guard(w, l, st, program_ids, skip);
    switch (st.kind) {
      case BlockStatement::Kind::Assign: emit_assign(w, spec, l, st, program_ids); break;
      case BlockStatement::Kind::Dot: emit_dot(w, spec, l, st, chip); break;
      case BlockStatement::Kind::RowSum:
      case BlockStatement::Kind::RowMax:
      case BlockStatement::Kind::ColumnSum:
      case BlockStatement::Kind::ColumnMax: emit_block_reduction(w, spec, l, st); break;
      case BlockStatement::Kind::Copy: emit_copy(w, spec, l, st, program_ids); break;
      case BlockStatement::Kind::Wait: w.line("sem.wait sem{}, 1", l.body_sem + st.semaphore); break;
      case BlockStatement::Kind::Slice: emit_slice(w, spec, l, st, program_ids); break;
    }
    w.place(skip);
    w.comment("end of statement");
  }
}

}  // namespace vtpu::kernels
