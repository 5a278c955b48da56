// Streams a [rows, cols] grid through VMEM in double-buffered blocks: the skeleton shared by the
// elementwise and row-wise kernels. It owns argument declaration, VMEM placement, the DMAs in and
// out, the semaphores and the two-parity block loop; the caller emits each block's compute.
//
// The row count, the column count, every Periodic operand's period and every strided input's row
// stride and offset are launch scalars (the last kernel arguments, in that order): `rows` and
// `cols` only size the blocks, so one program serves every shape up to them, e.g. every
// sequence length of a [batch * seq, hidden] activation or of a [batch * heads * seq, seq] score
// matrix. Blocks are sized for the most rows VMEM allows; with Periodic operands the kernel first
// shrinks them until they divide every period (so one DMA fetches a block's rows of a periodic
// operand).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/codegen/asm_writer.h"
#include "kernels/codegen/dtype.h"
#include "kernels/codegen/operand.h"
#include "kernels/codegen/vector_expr.h"
#include "sim/chip_config.h"

namespace vtpu::kernels {

struct StreamOperand {
  DType dtype = DType::F32;
  Layout layout = Layout::Full;  // outputs: Full ([rows, cols]) or Column ([rows], row kernels)
  bool output = false;
  bool strided = false;  // a Full input read in place from a row-strided view (Operand::strided)
};

// Registers holding the current block's origin and valid extent.
struct BlockExtent {
  int row0, col0, rows, cols;
};

class BlockStream {
 public:
  // `rows`, `cols`: the most rows and columns the program serves (the launch passes the real
  // ones). `max_block_cols`: widest block (the full row for row-wise kernels). `budget_bytes`: the
  // least VMEM per buffer set for the Full operands (more on chips whose HBM latency needs larger
  // blocks to hide); `extra_row_bytes` per block row is reserved for the caller.
  // `flat`: every operand is Full or Scalar and every Full one is a contiguous buffer of
  // `elements` (a launch scalar after the columns) laid on [rows, cols] rows of exactly `cols`, the
  // last row possibly partial (see flat_stream_scalars); each block moves in one contiguous DMA.
  // `row_granule` (a power of two, at least 8): blocks hold a multiple of that many rows, so a
  // caller that computes whole groups of them reads inside the buffers (the narrow row kernels'
  // transposed groups). Not with Periodic operands, whose blocks shrink by 8 rows.
  BlockStream(AsmWriter& w, const sim::ChipConfig& chip, int64_t rows, int64_t cols, std::vector<StreamOperand> operands,
              int64_t max_block_cols, uint64_t budget_bytes, int64_t extra_row_bytes = 0, bool flat = false,
              int64_t row_granule = 8);

  // Emits the block loop. `compute(set, extent)` emits one block's work; inputs of that set have
  // landed and outputs of that set may be written. The extent's registers belong to `compute`,
  // which must release them (after reading what it needs). Scalar inputs are loaded once into
  // vregs first, and Row inputs once into VMEM when one block spans the columns.
  void emit(RegisterPool& vregs, const std::function<void(int set, const BlockExtent&)>& compute);

  uint64_t vmem(size_t operand, int set) const { return buffers_.at(operand).vmem[set]; }
  // Each operand's buffer of `set` in a fresh scalar register (-1 for Scalar operands, which live
  // in vregs); the caller releases them.
  std::vector<int> take_buffer_bases(int set);
  int64_t row_stride(size_t operand) const { return buffers_.at(operand).row_stride; }
  int element_bytes(size_t operand) const { return dtype_bytes(operands_.at(operand).dtype); }
  const StreamOperand& operand(size_t i) const { return operands_.at(i); }
  size_t operand_count() const { return operands_.size(); }
  int scalar_vreg(size_t operand) const { return buffers_.at(operand).scalar_vreg; }
  int cols_arg() const { return cols_arg_; }  // the argument holding the launch's column count
  int64_t max_block_rows() const { return br_; }  // the block rows the launch uses may be fewer
  int64_t block_cols_padded() const { return bc_pad_; }
  uint64_t vmem_end() const { return vmem_end_; }  // first free VMEM byte after the buffers
  // VMEM the caller asked for with extra_row_bytes, per set.
  uint64_t extra(int set) const { return extra_[set]; }

 private:
  struct Buffer {
    int arg = 0;
    int period_arg = -1;  // Periodic operands: the scalar argument holding the period (rows)
    int stride_arg = -1, offset_arg = -1;  // strided inputs: their row stride and first element
    uint64_t vmem[2] = {0, 0};
    int64_t row_stride = 0;
    int scalar_vreg = -1;
    bool resident = false;  // loaded once before the block loop (Scalar; Row when one block spans the columns)
  };
  void block_extent(int block_reg, const BlockExtent& e);
  void size_blocks();  // s`br_reg_` and s`col_blocks_reg_` from the launch's shape
  void block_dma(size_t operand, int set, int sem, const BlockExtent& e);
  void flat_block_dma(size_t operand, int set, int sem, const BlockExtent& e);
  void issue_inputs(int block_reg, int set);
  void load_resident(RegisterPool& vregs);  // Scalar operands into vregs, resident Row operands into VMEM
  int streamed_inputs() const;
  int outputs() const;

  AsmWriter& w_;
  std::vector<StreamOperand> operands_;
  std::vector<Buffer> buffers_;
  int rows_arg_ = 0, cols_arg_ = 0, elements_arg_ = -1;  // elements_arg_: flat streams only
  int br_reg_ = -1, col_blocks_reg_ = -1;  // registers holding the launch's block rows and column blocks
  int64_t br_ = 0, bc_ = 0, bc_pad_ = 0, granule_ = 8;
  uint64_t extra_[2] = {0, 0};
  uint64_t vmem_end_ = 0;
};

// Loads the 8x128 tile of an operand at VMEM s`reg` + offset into `vreg`: Full/Periodic rows
// `row_stride` bytes apart, Row the same row for all sublanes, Column one value per sublane
// broadcast along the lanes. Scalars are never loaded per tile (see load_scalar_broadcast).
void load_operand_tile(AsmWriter& w, DType dtype, Layout layout, int vreg, int reg, int64_t offset, int64_t row_stride);

// load_operand_tile for operand `i` of `stream`: Column operands read from s`column_cursor`,
// the others from s`cursor` + `offset` bytes.
void load_tile(AsmWriter& w, const BlockStream& stream, size_t i, int vreg, int cursor, int column_cursor, int64_t offset = 0);

// vreg = the element at VMEM s`vmem_reg` in every lane. Reads 128 elements from there: the
// buffer must be padded to a full row (BlockStream's and the matmul's scalar buffers are).
void load_scalar_broadcast(AsmWriter& w, DType dtype, int vreg, int vmem_reg);

}  // namespace vtpu::kernels
