// Expr builders: torch-like type promotion, inserting the casts it implies; the text signature
// used in program-cache keys. The code generator is in tile_codegen.cc.
#include "kernels/codegen/vector_expr.h"

#include <fmt/format.h>

#include <bit>
#include <iterator>
#include <cmath>

namespace vtpu::kernels {
namespace {

// Ops that have an exact int32 form on the VPU; every other arithmetic op computes in f32.
bool has_int_form(ExprOp op) {
  return op == ExprOp::Neg || op == ExprOp::Abs || op == ExprOp::Relu || op == ExprOp::Square || op == ExprOp::Add ||
         op == ExprOp::Sub || op == ExprOp::Mul || op == ExprOp::Max || op == ExprOp::Min || op == ExprOp::Byte ||
         is_bitwise(op) || is_comparison(op);
}

const char* type_name(ValueType t) { return t == ValueType::F32 ? "f32" : t == ValueType::I32 ? "i32" : "mask"; }

}  // namespace

std::string_view expr_op_name(ExprOp op) {
  static constexpr std::string_view kNames[] = {
      "input", "const", "neg", "abs", "exp", "log", "tanh", "sigmoid", "relu", "gelu", "gelu_tanh", "silu", "sqrt",
      "rsqrt", "reciprocal", "square", "round_bf16", "round_f16", "not", "to_f32", "to_i32", "to_mask", "from_mask", "erf", "sin", "cos", "add", "sub",
      "mul", "div", "max", "min", "pow", "lt", "le", "gt", "ge", "eq", "ne", "and", "or", "byte", "bit_and", "bit_or", "bit_xor", "shr", "fma", "as_bits", "from_bits", "where"};
  static_assert(std::size(kNames) == static_cast<size_t>(ExprOp::Where) + 1, "one name per ExprOp, in order");
  return kNames[static_cast<int>(op)];
}

int Expr::push(ExprNode node) {
  nodes_.push_back(node);
  return static_cast<int>(nodes_.size()) - 1;
}

int Expr::input(int operand, ValueType type) {
  if (type == ValueType::Mask) throw KernelError("expression inputs are f32 or i32 (bool loads as i32)");
  ExprNode n;
  n.op = ExprOp::Input;
  n.type = type;
  n.input = operand;
  return push(n);
}

int Expr::constant(double value, ValueType type) {
  if (type == ValueType::Mask) throw KernelError("mask constants are not supported; compare a value instead");
  ExprNode n;
  n.op = ExprOp::Constant;
  n.type = type;
  n.constant = value;
  return push(n);
}

int Expr::cast(int a, ValueType type) {
  const ValueType from = node(a).type;
  if (from == type) return a;
  ExprNode n;
  n.type = type;
  n.in = {a, -1, -1};
  if (type == ValueType::F32) n.op = ExprOp::ToF32;
  else if (type == ValueType::I32) n.op = from == ValueType::Mask ? ExprOp::FromMask : ExprOp::ToI32;
  else n.op = ExprOp::ToMask;
  return push(n);
}

int Expr::round_to(DType dtype, int a) {
  if (dtype == DType::BF16) return unary(ExprOp::RoundBf16, a);
  if (dtype == DType::F16) return unary(ExprOp::RoundF16, a);
  return a;
}

int Expr::unary(ExprOp op, int a) {
  ExprNode n;
  n.op = op;
  if (op == ExprOp::Not) {
    n.in[0] = cast(a, ValueType::Mask);
    n.type = ValueType::Mask;
  } else if (op == ExprOp::RoundBf16 || op == ExprOp::RoundF16) {
    n.in[0] = cast(a, ValueType::F32);
  } else if (op == ExprOp::AsBits || op == ExprOp::FromBits) {  // reinterpretations: no conversion
    const ValueType from = op == ExprOp::AsBits ? ValueType::F32 : ValueType::I32;
    if (node(a).type != from) throw KernelError(fmt::format("{}: takes a {} value", expr_op_name(op), type_name(from)));
    n.in[0] = a;
    n.type = op == ExprOp::AsBits ? ValueType::I32 : ValueType::F32;
  } else {
    ValueType t = node(a).type == ValueType::Mask ? ValueType::I32 : node(a).type;
    if (t == ValueType::I32 && !has_int_form(op)) t = ValueType::F32;
    n.in[0] = cast(a, t);
    n.type = t;
  }
  return push(n);
}

int Expr::binary(ExprOp op, int a, int b) {
  ExprNode n;
  n.op = op;
  if (op == ExprOp::And || op == ExprOp::Or) {
    n.in = {cast(a, ValueType::Mask), cast(b, ValueType::Mask), -1};
    n.type = ValueType::Mask;
    return push(n);
  }
  const auto arith = [&](int x) { return node(x).type == ValueType::Mask ? ValueType::I32 : node(x).type; };
  if ((op == ExprOp::Byte || op == ExprOp::Shr) && (arith(a) != ValueType::I32 || node(b).op != ExprOp::Constant)) {
    throw KernelError(fmt::format("{}: takes an int32 value and a constant", expr_op_name(op)));
  }
  if (op == ExprOp::Shr && (node(b).constant < 0 || node(b).constant > 31)) {
    throw KernelError(fmt::format("shr: a shift of {} bits (0..31)", node(b).constant));
  }
  if (is_bitwise(op) && (arith(a) != ValueType::I32 || arith(b) != ValueType::I32)) {
    throw KernelError(fmt::format("{}: takes int32 bit patterns", expr_op_name(op)));
  }
  ValueType t = (arith(a) == ValueType::I32 && arith(b) == ValueType::I32) ? ValueType::I32 : ValueType::F32;
  if (t == ValueType::I32 && !has_int_form(op)) t = ValueType::F32;  // int / int is true division in torch
  n.in = {cast(a, t), cast(b, t), -1};
  n.type = is_comparison(op) ? ValueType::Mask : t;
  return push(n);
}

int Expr::where(int condition, int a, int b) {
  const auto arith = [&](int x) { return node(x).type == ValueType::Mask ? ValueType::I32 : node(x).type; };
  const ValueType t = (arith(a) == ValueType::I32 && arith(b) == ValueType::I32) ? ValueType::I32 : ValueType::F32;
  ExprNode n;
  n.op = ExprOp::Where;
  n.in = {cast(condition, ValueType::Mask), cast(a, t), cast(b, t)};
  n.type = t;
  return push(n);
}

int Expr::fma(int a, int b, int c) {
  ExprNode n;
  n.op = ExprOp::Fma;
  n.in = {cast(a, ValueType::F32), cast(b, ValueType::F32), cast(c, ValueType::F32)};
  n.type = ValueType::F32;
  return push(n);
}

int Expr::operand_count() const {
  int count = 0;
  for (const auto& n : nodes_) {
    if (n.op == ExprOp::Input) count = std::max(count, n.input + 1);
  }
  return count;
}

std::string Expr::signature() const {
  std::string s;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const auto& n = nodes_[i];
    s += fmt::format("{}={}:{}", i, expr_op_name(n.op), type_name(n.type));
    if (n.op == ExprOp::Input) s += fmt::format("#{}", n.input);
    if (n.op == ExprOp::Constant) s += fmt::format("({})", n.constant);
    for (int x : n.in) {
      if (x >= 0) s += fmt::format(",{}", x);
    }
    s += ';';
  }
  s += "out";
  for (int o : outputs_) s += fmt::format(",{}", o);
  return s;
}

}  // namespace vtpu::kernels
