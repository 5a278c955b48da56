// How a streamed operand lies on the [rows, cols] grid of a streaming kernel (elementwise, row
// and matmul epilogues all read operands this way), the launch scalars such kernels take, and the
// load/store mnemonic of each storage dtype. Shared by the generators and codegen's BlockStream.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/codegen/dtype.h"
#include "kernels/codegen/vector_expr.h"

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
  // Full only: the operand is a row-strided view of its buffer (a slice such as x[:, :d] or
  // x[::2]), read in place: its rows start `row_stride` elements apart, the first `offset`
  // elements in. Programs depend only on the flag: the launch passes both (stream_scalars).
  bool strided = false;
  int64_t row_stride = 0, offset = 0;
};

// The launch scalars of a kernel streamed by BlockStream (elementwise and row kernels): the row
// count, the column count (each at least 1 and at most what the program was generated for), then
// the period of each Periodic input, in input order, then each strided input's row stride and
// offset (in elements), in input order. Throws KernelError for a period that is not
// a positive multiple of 8 rows.
std::vector<int32_t> stream_scalars(int64_t rows, int64_t cols, const std::vector<Operand>& inputs);

// The launch scalars of a flat stream (BlockStream's `flat`): `elements` contiguous elements on
// rows of `width`: ceil(elements / width) rows, the width, then the element count.
std::vector<int32_t> flat_stream_scalars(int64_t elements, int64_t width);

// How a loaded element is held in a vreg (bf16 widens to f32, int8/bool widen to int32).
ValueType register_type(DType dtype);
// The vector load / store mnemonic for a dtype ("vld.bf16", ...).
const char* load_mnemonic(DType dtype);
const char* store_mnemonic(DType dtype);

}  // namespace vtpu::kernels
