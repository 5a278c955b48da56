// A block kernel's VMEM layout, semaphores and queues, and its body's lowering: shared by the grid
// loop (block_kernel.cc) and implemented in block_kernel_body.cc.
#pragma once

#include <string>
#include <vector>

#include "kernels/codegen/asm_writer.h"
#include "kernels/generators/block_kernel_spec.h"
#include "sim/chip_config.h"

namespace vtpu::kernels {

// A block one column wide (a row statistic) is held lane-broadcast: 128 lanes per row.
inline int64_t stored_cols(const BlockRef& r) { return r.block_cols == 1 ? 128 : r.block_cols; }
inline int64_t row_stride_bytes(const BlockRef& r) { return stored_cols(r) * dtype_bytes(r.dtype); }
// A block one row high (a row vector: a bias, a norm's weight) is read by every sublane at once
// (a load with stride 0), and written by storing all eight onto its one row.
inline int64_t sublane_stride_bytes(const BlockRef& r) { return r.block_rows == 1 ? 0 : row_stride_bytes(r); }
inline int64_t row_groups(const BlockRef& r) { return r.block_rows == 1 ? 1 : r.block_rows / 8; }
inline int64_t block_bytes(const BlockRef& r) { return r.block_rows * row_stride_bytes(r); }
// A kernel argument (inputs and outputs) and, unless left in HBM, a block the pipeline streams.
inline bool is_argument(const BlockRef& r) { return r.kind != BlockRef::Kind::Scratch; }
inline bool is_streamed(const BlockRef& r) { return is_argument(r) && !r.in_hbm; }
inline bool is_streamed(const BlockRef& r, BlockRef::Kind kind) { return is_streamed(r) && r.kind == kind; }

struct BlockLayout {
  std::vector<int64_t> slot0, slot1;  // per ref: VMEM addresses of its two buffers (scratch: one)
  int64_t staging = 0;                // bf16 copies of f32 dot weights
  int64_t bytes = 0;                  // all of it
  std::vector<int> argument;          // per input or output (in HBM too): its kernel argument
  std::vector<int64_t> argument_offset;  // bytes into that argument (packed outputs after the first)
  std::vector<int> base_slot;         // per streamed ref: scratch argument holding its current buffer
  std::vector<int> next_slot;         // per input: the buffer the next step reads
  std::vector<int> index_slot;        // per streamed ref: two scratch arguments, its block index
  std::vector<int> count_slot;        // per streamed ref: DMAs in flight (input: 0/1, output: 0..2)
  std::vector<int> sem, queue;        // per streamed ref
  int body_sem = 0;                   // the body's semaphore k is sem(body_sem + k)
  std::vector<int64_t> table_vmem;    // per scalar-prefetch table: its VMEM copy
  std::vector<int> table_argument;
};

// s`dst` = `a` at the program ids in s`ids` (table entries read from their VMEM copies).
void load_affine(AsmWriter& w, const BlockLayout& l, const GridAffine& a, const std::vector<int>& ids, int dst,
                 int scratch);
// Copies the scalar-prefetch tables into VMEM and waits for them: before the grid.
void emit_table_copies(AsmWriter& w, const BlockKernelSpec& spec, const BlockLayout& l);

// Lays out VMEM and declares the kernel's arguments on `w`; throws KernelError naming the kernel
// when the buffers do not fit the chip's VMEM.
BlockLayout lay_out_block_kernel(AsmWriter& w, const BlockKernelSpec& spec, const sim::ChipConfig& chip);

// s`dst` = the HBM address of input or output `i`'s array.
void load_array_base(AsmWriter& w, const BlockLayout& l, int i, int dst);

// s`dst` = the VMEM address of ref `i`'s current block.
void load_block_base(AsmWriter& w, const BlockLayout& l, const BlockKernelSpec& spec, int i, int dst);

// Throws KernelError naming the kernel.
[[noreturn]] void fail_block_kernel(const BlockKernelSpec& spec, const std::string& what);
// A Dot statement (block_kernel_dot.cc).
void emit_dot(AsmWriter& w, const BlockKernelSpec& spec, const BlockLayout& l, const BlockStatement& st,
              const sim::ChipConfig& chip);

// A RowSum, RowMax, ColumnSum or ColumnMax statement (block_kernel_reductions.cc).
void emit_block_reduction(AsmWriter& w, const BlockKernelSpec& spec, const BlockLayout& l, const BlockStatement& st);

// The body, lowered statement by statement (block_kernel_body.cc).
void emit_block_body(AsmWriter& w, const BlockKernelSpec& spec, const BlockLayout& l, const sim::ChipConfig& chip,
                     const std::vector<int>& program_ids);

}  // namespace vtpu::kernels
