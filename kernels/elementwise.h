// The fused elementwise kernel: any Expr over operands laid out on a 2-D [rows, cols] grid, one
// VPU loop streaming 8x128 tiles through double-buffered VMEM blocks. Arbitrary broadcasting is
// reduced to these four operand layouts by the planner (collapsing dims, or materialising the
// rest with the strided copy kernel).
#pragma once

#include <cstdint>
#include <vector>

#include "isa/program.h"
#include "kernels/dtype.h"
#include "kernels/vector_expr.h"
#include "sim/chip_config.h"

namespace vtpu::kernels {

enum class Layout : uint8_t {
  Full,    // [rows, cols], row-major
  Row,     // [cols]: the same row for every row (a bias)
  Column,  // [rows]: one value per row, broadcast along cols
  Scalar,  // one element
  Periodic,  // [period_rows, cols] repeated along rows (a [S, S] mask over [heads, S, S] scores)
};

// Full and Periodic operands are stored row by row like the output.
inline bool is_rowwise_stored(Layout l) { return l == Layout::Full || l == Layout::Periodic; }

struct Operand {
  DType dtype = DType::F32;
  Layout layout = Layout::Full;
  // Periodic only: this launch's period in rows, a multiple of 8. Programs do not depend on it:
  // the launch passes it (stream_scalars).
  int64_t period_rows = 0;
};

struct ElementwiseSpec {
  // The most rows and columns the program serves; the launch passes the real ones.
  int64_t rows = 1;
  int64_t cols = 1;
  std::vector<Operand> inputs;   // Input operand i of `expr` is inputs[i]
  std::vector<DType> outputs;    // one [rows, cols] tensor per expr output
  Expr expr;
};

// Inputs plus outputs one kernel streams at most; the fusion planner stops growing a group there.
// Scalar registers s1..s31: two cursors per operand, five for the tile loops, five for the block
// pipeline and the launch's block shape, one scratch (2 * 10 + 5 + 5 + 1 = 31; the operand-caps
// test in tests/kernels/test_rowwise.cc generates a kernel at the cap).
inline constexpr size_t kMaxElementwiseOperands = 10;
// The widest block an elementwise kernel streams: wider tensors take several blocks per row.
inline constexpr int64_t kMaxElementwiseBlockCols = 2048;

// Kernel arguments: the input buffers in order, the output buffers, then stream_scalars().
isa::Program make_elementwise(const ElementwiseSpec& spec, const sim::ChipConfig& chip);

// The launch scalars of a kernel streamed by BlockStream (elementwise and row kernels): the row
// count, the column count (each at least 1 and at most what the program was generated for), then
// the period of each Periodic input, in input order. Throws KernelError for a period that is not
// a positive multiple of 8 rows.
std::vector<int32_t> stream_scalars(int64_t rows, int64_t cols, const std::vector<Operand>& inputs);

// How a loaded element is held in a vreg (bf16 widens to f32, int8/bool widen to int32).
ValueType register_type(DType dtype);
// The vector load / store mnemonic for a dtype ("vld.bf16", ...).
const char* load_mnemonic(DType dtype);
const char* store_mnemonic(DType dtype);

}  // namespace vtpu::kernels
