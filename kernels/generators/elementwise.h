// The fused elementwise kernel: any Expr over operands laid out on a 2-D [rows, cols] grid, one
// VPU loop streaming 8x128 tiles through double-buffered VMEM blocks. Arbitrary broadcasting is
// reduced to these four operand layouts by the planner (collapsing dims, or materialising the
// rest with the strided copy kernel).
#pragma once

#include <cstdint>
#include <vector>

#include "isa/program.h"
#include "kernels/codegen/dtype.h"
#include "kernels/codegen/operand.h"
#include "kernels/codegen/vector_expr.h"
#include "sim/chip_config.h"

namespace vtpu::kernels {

struct ElementwiseSpec {
  // The most rows and columns the program serves; the launch passes the real ones.
  int64_t rows = 1;
  int64_t cols = 1;
  std::vector<Operand> inputs;   // Input operand i of `expr` is inputs[i]
  std::vector<DType> outputs;    // one [rows, cols] tensor per expr output
  Expr expr;
  // Every operand is Full or Scalar and every Full one a contiguous buffer of the same element
  // count, streamed lane-dense: rows of `cols` (a multiple of 128) over the flat data, the last row
  // cut at the end (launch scalars: flat_stream_scalars). How the planner lays out any operation
  // without broadcasting, whatever its tensors' shape.
  bool flat = false;
};

// Inputs plus outputs one kernel streams at most; the fusion planner stops growing a group there.
// Scalar registers s1..s31: two cursors per operand, five for the tile loops, five for the block
// pipeline and the launch's block shape, one scratch (2 * 10 + 5 + 5 + 1 = 31; the operand-caps
// test in tests/kernels/test_rowwise.cc generates a kernel at the cap).
inline constexpr size_t kMaxElementwiseOperands = 10;
// The widest block an elementwise kernel streams: wider tensors take several blocks per row.
inline constexpr int64_t kMaxElementwiseBlockCols = 2048;

// Kernel arguments: the input buffers in order, the output buffers, then stream_scalars() (flat
// kernels: flat_stream_scalars()).
isa::Program make_elementwise(const ElementwiseSpec& spec, const sim::ChipConfig& chip);

}  // namespace vtpu::kernels
