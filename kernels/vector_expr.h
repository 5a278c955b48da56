// An elementwise expression DAG (what one fused VPU loop computes per element) and its code
// generator, which turns it into vector instructions over one 8x128 tile. Used by the
// elementwise kernel and as the prologue/epilogue of matmuls and reductions.
#pragma once

#include <array>
#include <functional>
#include <string>
#include <vector>

#include "kernels/asm_writer.h"

namespace vtpu::kernels {

enum class ExprOp : uint8_t {
  Input, Constant,
  Neg, Abs, Exp, Log, Tanh, Sigmoid, Relu, GeluErf, GeluTanh, Silu, Sqrt, Rsqrt, Reciprocal, Square,
  RoundBf16, Not, ToF32, ToI32, ToMask, FromMask, Erf, Sin, Cos,
  Add, Sub, Mul, Div, Max, Min, Pow, Lt, Le, Gt, Ge, Eq, Ne, And, Or,
  Byte,  // byte b of an int32 word as 0..255 (b a constant 0..3): how integers split into exact bf16 digits
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
  int cast(int a, ValueType type);
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

// A value living in a register during code generation.
struct TileValue {
  ValueType type = ValueType::F32;
  int reg = -1;  // vreg, or mask register for ValueType::Mask
};

// Emits the instructions that compute `expr` for one tile. `load(operand, vreg)` emits the load
// of an Input operand into a vreg (called at most once per operand per tile). Returned values are
// the outputs in order, still holding their registers: the caller stores them and then calls
// release(). Registers of dead intermediates are reused as soon as their last use is emitted.
class TileCodegen {
 public:
  TileCodegen(AsmWriter& w, RegisterPool& vregs, RegisterPool& masks, int scratch_sreg)
      : w_(w), vregs_(vregs), masks_(masks), scratch_(scratch_sreg) {}

  // `preset` gives values already in registers for some Input operands (a matmul's accumulator).
  std::vector<TileValue> emit(const Expr& expr, const std::function<void(int operand, int vreg)>& load,
                              const std::vector<std::pair<int, TileValue>>& preset = {});
  void release(const TileValue& v);

  // Helpers also used by kernels around the expression.
  int constant_vreg(float value);      // a fresh vreg holding `value` in every lane
  void fill(int vreg, float value);    // every lane of `vreg` = value (through the scratch register)
  TileValue to_type(TileValue v, ValueType type, bool consume);

 private:
  TileValue emit_node(const Expr& expr, int index, const std::vector<TileValue>& values,
                      const std::vector<int>& remaining_uses);
  TileValue fresh(ValueType type);
  int gelu_erf(int x);
  int erf(int x);
  int sin_cos(int x, bool cosine);

  AsmWriter& w_;
  RegisterPool& vregs_;
  RegisterPool& masks_;
  int scratch_;
};

}  // namespace vtpu::kernels
