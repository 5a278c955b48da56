// What a row kernel computes, as the generator, the graph and the fusion planner read it: the op
// over the last axis, its prologue, output dtype, statistics' parameters and operand limits.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "kernels/codegen/dtype.h"
#include "kernels/codegen/operand.h"
#include "kernels/codegen/vector_expr.h"

namespace vtpu::kernels {

enum class RowOp : uint8_t { Sum, Mean, Max, Min, Var, Softmax, LogSoftmax, LayerNorm, RmsNorm, Prod };

std::string_view row_op_name(RowOp op);
// Reductions write [rows]; the others write [rows, cols].
bool row_op_reduces(RowOp op);

struct RowwiseSpec {
  // The most rows and columns the program serves; the launch passes the real ones.
  int64_t rows = 1;
  int64_t cols = 1;
  // Every launch's column count is a multiple of 128 (then no lane of a chunk needs masking).
  bool whole_chunks = false;
  RowOp op = RowOp::Sum;
  std::vector<Operand> inputs;     // operands of the prologue
  std::optional<Expr> prologue;    // one output: the value per element; default: input 0
  DType out_dtype = DType::F32;
  double eps = 1e-5;               // LayerNorm, RmsNorm
  int64_t correction = 1;          // Var divides by cols - correction (torch's unbiased default;
                                   // inf or NaN when that is 0, as torch gives)
  bool has_weight = false;         // LayerNorm, RmsNorm: a [cols] weight ...
  bool has_bias = false;           // ... and a [cols] bias (LayerNorm)
  DType weight_dtype = DType::F32; // of weight and bias
};

// The longest row a row kernel holds: a group of rows must sit in VMEM whole.
inline constexpr int64_t kMaxRowCols = 64 * 1024;

// Prologue inputs, weight, bias and output a row kernel takes at most: its row loops hold more
// scalar registers than the elementwise kernel's, so fewer cursors fit (the operand-caps test in
// tests/kernels/test_rowwise.cc generates layer_norm over a sum of 5 tensors, one periodic). The
// fusion planner leaves larger prologues unfused.
inline constexpr size_t kMaxRowOperands = 8;

}  // namespace vtpu::kernels
