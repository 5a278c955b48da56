// TileCodegen: each Expr node becomes a few vector instructions over one 8x128 tile. Composite
// ops (sigmoid, gelu, erf, pow, sin, cos) are spelled out in terms of the chip's exp/tanh/rcp/rsqrt,
// so their cost shows up in the simulated VPU and transcendental units (erf, sin/cos and erf-gelu
// in tile_math.cc).
#include "kernels/codegen/tile_codegen.h"

#include <fmt/format.h>

#include <bit>
#include <cmath>

namespace vtpu::kernels {

TileValue TileCodegen::fresh(ValueType type) {
  return {type, type == ValueType::Mask ? masks_.take() : vregs_.take()};
}

void TileCodegen::release(const TileValue& v) {
  if (v.type == ValueType::Mask) return masks_.release(v.reg);
  if (hoisted_) {  // the kernel's constants outlive the tile
    for (const auto& [bits, reg] : *hoisted_) {
      if (reg == v.reg) return;
    }
  }
  vregs_.release(v.reg);
}

void TileCodegen::fill(int vreg, float value) {
  w_.load_float(scratch_, value);
  w_.line("vbcast v{}, s{}", vreg, scratch_);
}

int TileCodegen::constant_vreg(float value) {
  const int v = vregs_.take();
  fill(v, value);
  return v;
}

uint32_t constant_bits(const ExprNode& n) {
  return n.type == ValueType::F32 ? std::bit_cast<uint32_t>(static_cast<float>(n.constant))
                                  : static_cast<uint32_t>(static_cast<int32_t>(n.constant));
}

std::map<uint32_t, int> hoist_constants(AsmWriter& w, const Expr& expr, RegisterPool& vregs, int scratch_sreg) {
  std::map<uint32_t, int> constants;
  for (const ExprNode& n : expr.nodes()) {
    if (n.op != ExprOp::Constant || n.type == ValueType::Mask || constants.count(constant_bits(n))) continue;
    const int v = vregs.take();
    w.load_float(scratch_sreg, std::bit_cast<float>(constant_bits(n)));
    w.line("vbcast v{}, s{}", v, scratch_sreg);
    constants[constant_bits(n)] = v;
  }
  return constants;
}

void release_hoisted(const std::map<uint32_t, int>& constants, RegisterPool& vregs) {
  for (const auto& [bits, v] : constants) vregs.release(v);
}

TileValue TileCodegen::to_type(TileValue v, ValueType type, bool consume) {
  if (v.type == type) return v;
  TileValue out = fresh(type);
  if (type == ValueType::Mask) {
    int f = v.reg;
    if (v.type == ValueType::I32) {  // i2f is exact for the zero test
      f = vregs_.take();
      w_.line("vcvt.i2f v{}, v{}", f, v.reg);
    }
    const int zero = constant_vreg(0.f);
    w_.line("vcmp.ne m{}, v{}, v{}", out.reg, f, zero);
    vregs_.release(zero);
    if (f != v.reg) vregs_.release(f);
  } else if (v.type == ValueType::Mask) {
    const int one = type == ValueType::F32 ? constant_vreg(1.f) : constant_vreg(std::bit_cast<float>(1));
    const int zero = constant_vreg(0.f);
    w_.line("vsel v{}, m{}, v{}, v{}", out.reg, v.reg, one, zero);
    vregs_.release(one);
    vregs_.release(zero);
  } else if (type == ValueType::F32) {
    w_.line("vcvt.i2f v{}, v{}", out.reg, v.reg);
  } else {
    w_.line("vcvt.f2i v{}, v{}", out.reg, v.reg);
  }
  if (consume) release(v);
  return out;
}

std::vector<TileValue> TileCodegen::emit(const Expr& expr, const std::function<void(int, int)>& load,
                                         const std::vector<std::pair<int, TileValue>>& preset) {
  const auto& nodes = expr.nodes();
  // Liveness from the outputs back: dead nodes are never computed and hold no uses.
  std::vector<char> live(nodes.size(), 0);
  for (int o : expr.outputs()) live[o] = 1;
  for (size_t i = nodes.size(); i-- > 0;) {
    if (!live[i]) continue;
    for (int x : nodes[i].in) {
      if (x >= 0) live[x] = 1;
    }
  }
  std::vector<int> uses(nodes.size(), 0);
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!live[i]) continue;
    for (int x : nodes[i].in) {
      if (x >= 0) ++uses[x];
    }
  }
  for (int o : expr.outputs()) ++uses[o];  // outputs stay live for the caller
  std::vector<TileValue> values(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (uses[i] == 0) continue;  // dead node: never computed
    const ExprNode& n = nodes[i];
    if (n.op == ExprOp::Input) {
      bool found = false;
      for (const auto& [operand, value] : preset) {
        if (operand == n.input) {
          values[i] = to_type(value, n.type, false);
          if (values[i].reg == value.reg) values[i] = {value.type, value.reg};
          found = true;
        }
      }
      if (!found) {
        values[i] = fresh(n.type);
        load(n.input, values[i].reg);
      }
      continue;
    }
    if (n.op == ExprOp::Constant && hoisted_ && hoisted_->count(constant_bits(n))) {
      values[i] = {n.type, hoisted_->at(constant_bits(n))};
      continue;
    }
    values[i] = emit_node(expr, static_cast<int>(i), values, uses);
    for (int x : n.in) {
      if (x >= 0 && --uses[x] == 0) {
        bool is_preset = false;
        for (const auto& p : preset) is_preset |= p.second.reg == values[x].reg && p.second.type == values[x].type;
        if (!is_preset) release(values[x]);
      }
    }
  }
  std::vector<TileValue> out;
  for (int o : expr.outputs()) out.push_back(values[o]);
  return out;
}

TileValue TileCodegen::emit_node(const Expr& expr, int index, const std::vector<TileValue>& values,
                                 const std::vector<int>&) {
  const ExprNode& n = expr.node(index);
  const auto in = [&](int k) { return values[n.in[k]].reg; };
  const bool is_int = n.in[0] >= 0 && values[n.in[0]].type == ValueType::I32;
  const auto unary = [&](const char* mnemonic) {
    const TileValue d = fresh(n.type);
    w_.line("{} v{}, v{}", mnemonic, d.reg, in(0));
    return d;
  };
  const auto binary = [&](const char* mnemonic, int a, int b) {
    const TileValue d = fresh(n.type);
    if (n.type == ValueType::Mask) w_.line("{} m{}, v{}, v{}", mnemonic, d.reg, a, b);
    else w_.line("{} v{}, v{}, v{}", mnemonic, d.reg, a, b);
    return d;
  };
  const auto int_const = [&](int32_t value) { return constant_vreg(std::bit_cast<float>(value)); };
  // int32 a < b as a fresh mask
  const auto ilt = [&](int a, int b) {
    const int m = masks_.take();
    w_.line("vicmp.lt m{}, v{}, v{}", m, a, b);
    return m;
  };
  switch (n.op) {
    case ExprOp::Input: break;
    case ExprOp::Constant: return {n.type, constant_vreg(std::bit_cast<float>(constant_bits(n)))};
    case ExprOp::Neg:
      if (!is_int) return unary("vneg");
      else {
        const int m1 = int_const(-1);
        const TileValue d = binary("vimul", in(0), m1);
        vregs_.release(m1);
        return d;
      }
    case ExprOp::Abs:
      if (!is_int) return unary("vabs");
      else {
        const int zero = int_const(0), m1 = int_const(-1);
        const TileValue d = fresh(n.type);
        w_.line("vimul v{}, v{}, v{}", d.reg, in(0), m1);
        const int m = ilt(in(0), zero);
        w_.line("vsel v{}, m{}, v{}, v{}", d.reg, m, d.reg, in(0));
        masks_.release(m);
        vregs_.release(zero);
        vregs_.release(m1);
        return d;
      }
    case ExprOp::Exp: return unary("vexp");
    case ExprOp::Log: return unary("vlog");
    case ExprOp::Tanh: return unary("vtanh");
    case ExprOp::Rsqrt: return unary("vrsqrt");
    case ExprOp::Reciprocal: return unary("vrcp");
    case ExprOp::RoundBf16: return unary("vcvt.bf16");
    case ExprOp::RoundF16: return unary("vcvt.f16");
    case ExprOp::Sqrt: {  // 1/rsqrt keeps sqrt(0) = 0 and sqrt(inf) = inf
      const TileValue d = unary("vrsqrt");
      w_.line("vrcp v{}, v{}", d.reg, d.reg);
      return d;
    }
    case ExprOp::Square: return binary(is_int ? "vimul" : "vmul", in(0), in(0));
    case ExprOp::Sigmoid: {
      const TileValue d = unary("vneg");
      w_.line("vexp v{}, v{}", d.reg, d.reg);
      const int one = constant_vreg(1.f);
      w_.line("vadd v{}, v{}, v{}", d.reg, d.reg, one);
      w_.line("vrcp v{}, v{}", d.reg, d.reg);
      vregs_.release(one);
      return d;
    }
    case ExprOp::Silu: {
      const TileValue d = unary("vneg");
      w_.line("vexp v{}, v{}", d.reg, d.reg);
      const int one = constant_vreg(1.f);
      w_.line("vadd v{}, v{}, v{}", d.reg, d.reg, one);
      w_.line("vdiv v{}, v{}, v{}", d.reg, in(0), d.reg);
      vregs_.release(one);
      return d;
    }
    case ExprOp::Relu:
      if (!is_int) {
        const int zero = constant_vreg(0.f);
        const TileValue d = binary("vmax", in(0), zero);
        vregs_.release(zero);
        return d;
      } else {
        const int zero = int_const(0);
        const int m = ilt(in(0), zero);
        const TileValue d = fresh(n.type);
        w_.line("vsel v{}, m{}, v{}, v{}", d.reg, m, zero, in(0));
        masks_.release(m);
        vregs_.release(zero);
        return d;
      }
    case ExprOp::GeluTanh: {  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
      const TileValue d = fresh(n.type);
      const int c = vregs_.take();
      w_.line("vmul v{}, v{}, v{}", d.reg, in(0), in(0));
      fill(c, 0.044715f);
      w_.line("vmul v{}, v{}, v{}", d.reg, d.reg, c);
      w_.line("vfma v{}, v{}, v{}, v{}", d.reg, d.reg, in(0), in(0));
      fill(c, static_cast<float>(std::sqrt(2.0 / M_PI)));
      w_.line("vmul v{}, v{}, v{}", d.reg, d.reg, c);
      w_.line("vtanh v{}, v{}", d.reg, d.reg);
      fill(c, 1.f);
      w_.line("vadd v{}, v{}, v{}", d.reg, d.reg, c);
      w_.line("vmul v{}, v{}, v{}", d.reg, d.reg, in(0));
      fill(c, 0.5f);
      w_.line("vmul v{}, v{}, v{}", d.reg, d.reg, c);
      vregs_.release(c);
      return d;
    }
    case ExprOp::GeluErf: return {n.type, gelu_erf(in(0))};
    case ExprOp::Erf: return {n.type, erf(in(0))};
    case ExprOp::Sin: return {n.type, sin_cos(in(0), false)};
    case ExprOp::Cos: return {n.type, sin_cos(in(0), true)};
    case ExprOp::Not: {
      const TileValue d = fresh(ValueType::Mask);
      w_.line("mnot m{}, m{}", d.reg, in(0));
      return d;
    }
    case ExprOp::ToF32: case ExprOp::ToI32: case ExprOp::ToMask: case ExprOp::FromMask:
      return to_type(values[n.in[0]], n.type, false);
    case ExprOp::Add: return binary(is_int ? "viadd" : "vadd", in(0), in(1));
    case ExprOp::Mul: return binary(is_int ? "vimul" : "vmul", in(0), in(1));
    case ExprOp::Div: return binary("vdiv", in(0), in(1));
    case ExprOp::Sub:
      if (!is_int) return binary("vsub", in(0), in(1));
      else {
        const int m1 = int_const(-1);
        const TileValue d = binary("vimul", in(1), m1);
        w_.line("viadd v{}, v{}, v{}", d.reg, in(0), d.reg);
        vregs_.release(m1);
        return d;
      }
    case ExprOp::Max: case ExprOp::Min:
      if (!is_int) return binary(n.op == ExprOp::Max ? "vmax" : "vmin", in(0), in(1));
      else {
        const int m = ilt(in(0), in(1));
        const TileValue d = fresh(n.type);
        if (n.op == ExprOp::Max) w_.line("vsel v{}, m{}, v{}, v{}", d.reg, m, in(1), in(0));
        else w_.line("vsel v{}, m{}, v{}, v{}", d.reg, m, in(0), in(1));
        masks_.release(m);
        return d;
      }
    case ExprOp::Pow: {
      const ExprNode& e = expr.node(n.in[1]);
      const bool small_int = e.op == ExprOp::Constant && e.constant == std::round(e.constant) &&
                             std::fabs(e.constant) <= 16;
      if (small_int) {  // exact repeated multiplication; also right for negative bases
        int k = static_cast<int>(std::fabs(e.constant));
        const TileValue d = fresh(n.type);
        const int base = vregs_.take();
        w_.line("vmov v{}, v{}", base, in(0));
        const int one = constant_vreg(1.f);
        w_.line("vmov v{}, v{}", d.reg, one);
        vregs_.release(one);
        while (k > 0) {
          if (k & 1) w_.line("vmul v{}, v{}, v{}", d.reg, d.reg, base);
          k >>= 1;
          if (k) w_.line("vmul v{}, v{}, v{}", base, base, base);
        }
        if (e.constant < 0) w_.line("vrcp v{}, v{}", d.reg, d.reg);
        vregs_.release(base);
        return d;
      }
      if (e.op == ExprOp::Constant && std::fabs(e.constant) == 0.5) {  // as torch: rsqrt, and sqrt as 1/rsqrt
        const TileValue d = unary("vrsqrt");
        if (e.constant > 0) w_.line("vrcp v{}, v{}", d.reg, d.reg);
        return d;
      }
      return {n.type, pow(in(0), in(1))};  // any base and exponent (tile_math.cc)
    }
    case ExprOp::Byte: {  // (x >> 8b) & 255, logical: the top byte too comes out unsigned
      const auto b = static_cast<int>(expr.node(n.in[1]).constant);
      const TileValue d = fresh(n.type);
      w_.line("vshri v{}, v{}, {}", d.reg, in(0), 8 * b);
      const int low_byte = int_const(255);
      w_.line("vand v{}, v{}, v{}", d.reg, d.reg, low_byte);
      vregs_.release(low_byte);
      return d;
    }
    case ExprOp::BitAnd: return binary("vand", in(0), in(1));
    case ExprOp::BitXor: return binary("vxor", in(0), in(1));
    case ExprOp::BitOr: {  // a | b  ==  (a ^ b) ^ (a & b): the ISA has and and xor
      const TileValue d = binary("vxor", in(0), in(1));
      const int both = vregs_.take();
      w_.line("vand v{}, v{}, v{}", both, in(0), in(1));
      w_.line("vxor v{}, v{}, v{}", d.reg, d.reg, both);
      vregs_.release(both);
      return d;
    }
    case ExprOp::Fma: {
      const TileValue d = fresh(n.type);
      w_.line("vfma v{}, v{}, v{}, v{}", d.reg, in(0), in(1), in(2));
      return d;
    }
    case ExprOp::AsBits: case ExprOp::FromBits: return unary("vmov");  // vregs hold 32 untyped bits
    case ExprOp::Shr: {
      const TileValue d = fresh(n.type);
      w_.line("vshri v{}, v{}, {}", d.reg, in(0), static_cast<int>(expr.node(n.in[1]).constant));
      return d;
    }
    case ExprOp::Lt: case ExprOp::Le: case ExprOp::Gt: case ExprOp::Ge: case ExprOp::Eq: case ExprOp::Ne: {
      const bool swap = n.op == ExprOp::Gt || n.op == ExprOp::Ge;
      const int a = swap ? in(1) : in(0), b = swap ? in(0) : in(1);
      if (!is_int) {
        const char* m = n.op == ExprOp::Lt || n.op == ExprOp::Gt ? "vcmp.lt"
                        : n.op == ExprOp::Le || n.op == ExprOp::Ge ? "vcmp.le"
                        : n.op == ExprOp::Eq ? "vcmp.eq" : "vcmp.ne";
        return binary(m, a, b);
      }
      const TileValue d = fresh(ValueType::Mask);
      if (n.op == ExprOp::Lt || n.op == ExprOp::Gt) {
        w_.line("vicmp.lt m{}, v{}, v{}", d.reg, a, b);
      } else if (n.op == ExprOp::Le || n.op == ExprOp::Ge) {  // a <= b  ==  !(b < a)
        w_.line("vicmp.lt m{}, v{}, v{}", d.reg, b, a);
        w_.line("mnot m{}, m{}", d.reg, d.reg);
      } else {  // a == b  ==  !(a < b) & !(b < a)
        const int t = masks_.take();
        w_.line("vicmp.lt m{}, v{}, v{}", d.reg, a, b);
        w_.line("mnot m{}, m{}", d.reg, d.reg);
        w_.line("vicmp.lt m{}, v{}, v{}", t, b, a);
        w_.line("mnot m{}, m{}", t, t);
        w_.line("mand m{}, m{}, m{}", d.reg, d.reg, t);
        if (n.op == ExprOp::Ne) w_.line("mnot m{}, m{}", d.reg, d.reg);
        masks_.release(t);
      }
      return d;
    }
    case ExprOp::And: {
      const TileValue d = fresh(ValueType::Mask);
      w_.line("mand m{}, m{}, m{}", d.reg, in(0), in(1));
      return d;
    }
    case ExprOp::Or: {  // a | b  ==  !(!a & !b)
      const TileValue d = fresh(ValueType::Mask);
      const int t = masks_.take();
      w_.line("mnot m{}, m{}", d.reg, in(0));
      w_.line("mnot m{}, m{}", t, in(1));
      w_.line("mand m{}, m{}, m{}", d.reg, d.reg, t);
      w_.line("mnot m{}, m{}", d.reg, d.reg);
      masks_.release(t);
      return d;
    }
    case ExprOp::Where: {
      const TileValue d = fresh(n.type);
      w_.line("vsel v{}, m{}, v{}, v{}", d.reg, in(0), in(1), in(2));
      return d;
    }
  }
  throw KernelError(fmt::format("no lowering for expression op '{}'", expr_op_name(n.op)));
}

}  // namespace vtpu::kernels
