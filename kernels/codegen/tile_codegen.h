// Code generation of one Expr (vector_expr.h) over one 8x128 tile: the vector instructions every
// streaming kernel runs per tile, with registers reused as soon as a value's last use is emitted.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "kernels/codegen/asm_writer.h"
#include "kernels/codegen/vector_expr.h"

namespace vtpu::kernels {

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

  // Vregs a kernel filled before its tile loop, by the constant's 32 bits: Constant nodes of the
  // expression read them instead of broadcasting their value again on every tile (an `x + 1` tile
  // is otherwise a scalar load, a broadcast and the add's wait on it). release() leaves them be.
  void use_hoisted_constants(const std::map<uint32_t, int>* constants) { hoisted_ = constants; }

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
  void reduce_large(int x, int q, int r);  // sin_cos's range reduction for |x| >= 2^23
  int pow(int base, int exponent);

  AsmWriter& w_;
  RegisterPool& vregs_;
  RegisterPool& masks_;
  int scratch_;
  const std::map<uint32_t, int>* hoisted_ = nullptr;
};

// The 32 bits a Constant node of `type` holds in every lane (an int32 constant's bits as they are).
uint32_t constant_bits(const ExprNode& n);

// Fills one vreg per distinct Constant node of `expr` (kernels call it before their tile loop and
// hand the map to TileCodegen::use_hoisted_constants); release_hoisted gives them back.
std::map<uint32_t, int> hoist_constants(AsmWriter& w, const Expr& expr, RegisterPool& vregs, int scratch_sreg);
void release_hoisted(const std::map<uint32_t, int>& constants, RegisterPool& vregs);

}  // namespace vtpu::kernels
