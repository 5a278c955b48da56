// An elementwise expression DAG (what one fused VPU loop computes per element), with torch-like
// dtype promotion. tile_codegen.h turns it into vector instructions over one 8x128 tile. Used by
// the elementwise kernel and as the prologue/epilogue of matmuls and reductions.
#pragma once

#include <array>
#include <functional>
#include <string>
#include <vector>

#include "kernels/codegen/dtype.h"
#include "kernels/codegen/kernel_error.h"

namespace vtpu::kernels {

enum class ExprOp : uint8_t {
  Input, Constant,
  Neg, Abs, Exp, Log, Tanh, Sigmoid, Relu, GeluErf, GeluTanh, Silu, Sqrt, Rsqrt, Reciprocal, Square,
  RoundBf16, RoundF16, Not, ToF32, ToI32, ToMask, FromMask, Erf, Sin, Cos,
  Add, Sub, Mul, Div, Max, Min, Pow, Lt, Le, Gt, Ge, Eq, Ne, And, Or,
  Byte,  // byte b of an int32 word as 0..255 (b a constant 0..3): how integers split into exact bf16 digits
  BitAnd, BitOr, BitXor,  // int32 bit patterns (int64 too, word by word: kernels/compose/int64_words.h)
  Shr,    // int32 >> a constant 0..31, logical (zeros shift in): carries between int64's words
  Fma,    // a * b + c in f32 with one rounding: exact remainders (kernels/compose/float_remainder.h)
  AsBits, FromBits,  // an f32's bit pattern as int32, and back: exponents, exact powers of two
  Where,
};

// What a vreg (or mask register) holds. Bool tensors load as I32 0/1 and become Mask on demand.
enum class ValueType : uint8_t { F32, I32, Mask };

struct ExprNode {
  ExprOp op = ExprOp::Constant;
  ValueType type = ValueType::F32;
  std::array<int, 3> in{-1, -1, -1};
  double constant = 0;  // Constant
  int input = -1;       // Input: which kernel operand
};

// Nodes are appended in topological order; builders insert the casts that torch's type
// promotion implies (int op float -> float, comparisons -> Mask, where's condition -> Mask).
class Expr {
 public:
  int input(int operand, ValueType type);
  int constant(double value, ValueType type = ValueType::F32);
  int unary(ExprOp op, int a);
  int binary(ExprOp op, int a, int b);
  int where(int condition, int a, int b);
  int fma(int a, int b, int c);
  int cast(int a, ValueType type);
  // `a` rounded as torch stores an op's result of `dtype`: bf16 and f16 results are rounded after
  // every op even when computed in f32 (a fused chain must not keep the extra bits); others pass.
  int round_to(DType dtype, int a);
  void add_output(int node) { outputs_.push_back(node); }

  const std::vector<ExprNode>& nodes() const { return nodes_; }
  const std::vector<int>& outputs() const { return outputs_; }
  const ExprNode& node(int i) const { return nodes_.at(i); }
  int operand_count() const;  // 1 + highest Input operand index
  // Stable text form, part of program-cache keys.
  std::string signature() const;

 private:
  int push(ExprNode node);
  std::vector<ExprNode> nodes_;
  std::vector<int> outputs_;
};

std::string_view expr_op_name(ExprOp op);

inline bool is_comparison(ExprOp op) {
  return op == ExprOp::Lt || op == ExprOp::Le || op == ExprOp::Gt || op == ExprOp::Ge || op == ExprOp::Eq ||
         op == ExprOp::Ne;
}

// Ops on int32 bit patterns (shifts included): integer in, integer out, never through f32.
inline bool is_bitwise(ExprOp op) {
  return op == ExprOp::BitAnd || op == ExprOp::BitOr || op == ExprOp::BitXor || op == ExprOp::Shr;
}

}  // namespace vtpu::kernels
