// What a Pallas-style kernel is once traced (torch_bridge/python/vtpu/pallas): the grid, the
// refs (arrays seen a block at a time, scratch buffers) and the body's statements over blocks.
// block_kernel.h generates the kernel from it.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/codegen/dtype.h"
#include "kernels/codegen/vector_expr.h"

namespace vtpu::kernels {

constexpr int kMaxBlockGrid = 3;

// scale * table[offset + sum over g of coef[g] * program_id(g)]: an entry of a scalar-prefetch
// table (an int32 array the kernel copies to VMEM before its grid), read with `sld`.
struct TableLookup {
  int table = 0;
  int64_t scale = 1;
  std::array<int64_t, kMaxBlockGrid> coef{};
  int64_t offset = 0;
};

// offset + sum over g of coef[g] * program_id(g) + the lookups: block indices, copy offsets and
// pl.when conditions.
struct GridAffine {
  std::array<int64_t, kMaxBlockGrid> coef{};
  int64_t offset = 0;
  std::vector<TableLookup> lookups;
};

// One parameter of the kernel body: an array in HBM seen a block at a time (inputs and
// outputs, kernel arguments in order), or a VMEM buffer that lives across grid steps (scratch,
// also the tracer's temporaries). Blocks are 2-D, row-major in VMEM.
struct BlockRef {
  enum class Kind : uint8_t { Input, Output, Scratch };
  Kind kind = Kind::Input;
  DType dtype = DType::F32;          // f32, bf16 or int32
  int64_t rows = 0, cols = 0;        // the whole array (scratch: the block)
  int64_t block_rows = 0, block_cols = 0;
  // Block index along each dim, a function of the program ids.
  std::array<GridAffine, 2> index{};
  // Left in HBM (Pallas's memory_space=ANY): no block, no pipeline; the body moves its parts with
  // Copy statements.
  bool in_hbm = false;
};

// The rows [row0, row0 + rows) and columns [col0, col0 + cols) of a ref (an HBM array or a VMEM
// buffer), the corners affine in the program ids.
struct BlockWindow {
  int ref = -1;
  GridAffine row0, col0;
};

// `affine == 0` (or != 0) over the program ids: what `pl.when` guards a statement with.
struct BlockCondition {
  GridAffine affine;
  bool equal = true;
};

struct BlockStatement {
  // Assign: target's block = expr, tile by tile; expr's Input operand i reads ref operands[i]'s
  // block at the same tile (a ref whose block is one column wide is read as a column vector,
  // broadcast across the lanes). Dot: target (+)= operands[0] @ operands[1] on the MXUs, f32
  // accumulation. RowSum / RowMax: target (one column wide) = the reduction of operands[0]'s
  // rows; ColumnSum / ColumnMax: target (one row high) = the reduction of its columns. Copy: an
  // async DMA from window `from` to window `to` (one in HBM, one in VMEM) of rows x cols
  // elements, signalling the body's semaphore `semaphore`; Wait: waits for one copy signalling it
  // (Pallas's make_async_copy(...).start() and .wait()). Slice: window `to` = window `from`,
  // both in VMEM, rows x cols elements by vector loads and stores (a sliced load into a
  // temporary, a value stored into a slice); rows a multiple of 8, or 1.
  enum class Kind : uint8_t { Assign, Dot, RowSum, RowMax, ColumnSum, ColumnMax, Copy, Wait, Slice };
  Kind kind = Kind::Assign;
  int target = -1;
  std::vector<int> operands;
  Expr expr;
  std::vector<GridAffine> scalars;     // Assign: expr's Input operands past `operands`, one int32 per step
  std::vector<int> iotas;              // Assign: Input operands past those: each element's index along a dim
  bool accumulate = false;             // Dot only
  BlockWindow from, to;                // Copy and Slice
  int64_t rows = 0, cols = 0;          // Copy and Slice
  int semaphore = -1;                  // Copy and Wait
  std::vector<BlockCondition> when;    // all must hold for the statement to run
};

struct BlockKernelSpec {
  std::string name;
  std::vector<int64_t> grid;  // at most kMaxBlockGrid dims; the last varies fastest
  std::vector<BlockRef> refs;
  std::vector<BlockStatement> body;
  int semaphores = 0;  // the body's own (scratch SemaphoreType.DMA), for Copy and Wait
  std::vector<int64_t> tables;  // scalar prefetch: each table's length (int32), the first kernel arguments
  // The outputs one after another in one buffer argument: a graph node has one value.
  bool packed_outputs = false;
};

}  // namespace vtpu::kernels
