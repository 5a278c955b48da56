// Per 8x128 tile: counters = the tiles' flat element indices (viota + base), ten Philox rounds on
// the VPU (vimul / vimulhu for the 32x32 -> 64-bit products, vxor, viadd for the key schedule),
// then the first one or two words become f32 uniforms and an Expr shapes them (Box-Muller's log,
// sqrt and cos come from TileCodegen). The tile loop and its staging are kernels/flat_generator.
#include "kernels/generators/random.h"

#include <algorithm>

#include "kernels/codegen/asm_writer.h"
#include "kernels/codegen/tile_codegen.h"
#include "kernels/codegen/flat_generator.h"
#include "kernels/codegen/vector_expr.h"

namespace vtpu::kernels {
namespace {

constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;  // Philox4x32 multipliers
constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;  // and Weyl key increments
constexpr int kRounds = 10;

// The distribution applied to operand 0 (and 1): uniforms in [0, 1) resp. (0, 1].
Expr shape_expr(const RandomSpec& spec) {
  Expr e;
  const int u = e.input(0, ValueType::F32);
  int out;
  if (spec.kind == RandomKind::Uniform) {
    out = e.binary(ExprOp::Add, e.constant(spec.a), e.binary(ExprOp::Mul, u, e.constant(spec.b - spec.a)));
  } else {
    const int radius = e.unary(ExprOp::Sqrt, e.binary(ExprOp::Mul, e.unary(ExprOp::Log, u), e.constant(-2.0)));
    const int angle = e.binary(ExprOp::Mul, e.input(1, ValueType::F32), e.constant(6.283185307179586));
    const int z = e.binary(ExprOp::Mul, radius, e.unary(ExprOp::Cos, angle));
    out = e.binary(ExprOp::Add, e.constant(spec.a), e.binary(ExprOp::Mul, z, e.constant(spec.b)));
  }
  out = e.round_to(spec.out, out);
  e.add_output(out);
  return e;
}

}  // namespace

std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> c, std::array<uint32_t, 2> k) {
  for (int r = 0; r < kRounds; ++r) {
    if (r > 0) k = {k[0] + kW0, k[1] + kW1};
    const uint64_t p0 = uint64_t{kM0} * c[0], p1 = uint64_t{kM1} * c[2];
    c = {uint32_t(p1 >> 32) ^ c[1] ^ k[0], uint32_t(p1), uint32_t(p0 >> 32) ^ c[3] ^ k[1], uint32_t(p0)};
  }
  return c;
}

isa::Program make_random(const RandomSpec& spec, const sim::ChipConfig& chip) {
  if (!dtype_is_float(spec.out)) throw KernelError("random: the output is f32, bf16 or f16");
  constexpr uint64_t kKeyVmem = 0, kStagingVmem = 512;
  const Expr expr = shape_expr(spec);

  AsmWriter w("random");
  const int out_arg = w.argument("out", isa::ArgumentKind::Buffer);
  const int key_arg = w.argument("key", isa::ArgumentKind::Buffer);
  const int count_arg = w.argument("count", isa::ArgumentKind::Scalar);
  auto& s = w.sregs();
  RegisterPool vregs("vector registers", 0, 31), masks("mask registers", 1, 7);
  const int k0 = s.take(), k1 = s.take(), t = s.take(), u = s.take(), scratch = s.take();
  TileCodegen codegen(w, vregs, masks, scratch);
  // the key: two words through VMEM into scalar registers
  w.load_immediate(t, kKeyVmem);
  w.line("sarg s{}, {}", u, key_arg);
  w.load_immediate(k0, 8);
  w.line("sli s{}, 1", k1);
  w.dma_to_vmem(0, 0, {.vmem = t, .hbm = u, .rows = k1, .row_bytes = k0, .vmem_stride = k0, .hbm_stride = k0});
  w.line("sem.wait sem0, 1");
  w.line("sld s{}, s{}, 0", k0, t);
  w.line("sld s{}, s{}, 4", k1, t);
  s.release(t);
  s.release(u);
  // constants for every tile
  const int m0 = vregs.take(), m1 = vregs.take(), w0 = vregs.take(), w1 = vregs.take();
  for (auto [reg, value] : {std::pair{m0, kM0}, {m1, kM1}, {w0, kW0}, {w1, kW1}}) {
    w.load_immediate(scratch, value);
    w.line("vbcast v{}, s{}", reg, scratch);
  }
  emit_flat_generator(w, chip, vregs, codegen, spec.out, out_arg, count_arg, kStagingVmem, [&](int indices) {
    // counter (flat index, 0, 0, 0), key (k0, k1)
    int c[4] = {indices, vregs.take(), vregs.take(), vregs.take()};
    const int key0 = vregs.take(), key1 = vregs.take();
    for (int i = 1; i < 4; ++i) w.line("vbcast v{}, s0", c[i]);
    w.line("vbcast v{}, s{}", key0, k0);
    w.line("vbcast v{}, s{}", key1, k1);
    for (int r = 0; r < kRounds; ++r) {
      if (r > 0) {
        w.line("viadd v{}, v{}, v{}", key0, key0, w0);
        w.line("viadd v{}, v{}, v{}", key1, key1, w1);
      }
      const int lo0 = vregs.take(), hi0 = vregs.take(), lo1 = vregs.take(), hi1 = vregs.take();
      w.line("vimul v{}, v{}, v{}", lo0, c[0], m0);
      w.line("vimulhu v{}, v{}, v{}", hi0, c[0], m0);
      w.line("vimul v{}, v{}, v{}", lo1, c[2], m1);
      w.line("vimulhu v{}, v{}, v{}", hi1, c[2], m1);
      w.line("vxor v{}, v{}, v{}", hi1, hi1, c[1]);
      w.line("vxor v{}, v{}, v{}", hi1, hi1, key0);
      w.line("vxor v{}, v{}, v{}", hi0, hi0, c[3]);
      w.line("vxor v{}, v{}, v{}", hi0, hi0, key1);
      for (int reg : c) vregs.release(reg);
      c[0] = hi1, c[1] = lo1, c[2] = hi0, c[3] = lo0;
    }
    vregs.release(key0);
    vregs.release(key1);
    vregs.release(c[2]);
    vregs.release(c[3]);
    // words -> uniforms: 24 bits each, exact in f32; Normal's first is shifted to (0, 1] for log
    for (int i = 0; i < 2; ++i) {
      w.line("vshri v{}, v{}, 8", c[i], c[i]);
      w.line("vcvt.i2f v{}, v{}", c[i], c[i]);
    }
    const int step = codegen.constant_vreg(1.0f / float(1 << 24));
    if (spec.kind == RandomKind::Normal) {
      const int one = codegen.constant_vreg(1.0f);
      w.line("vadd v{}, v{}, v{}", c[0], c[0], one);
      vregs.release(one);
    }
    for (int i = 0; i < 2; ++i) w.line("vmul v{}, v{}, v{}", c[i], c[i], step);
    vregs.release(step);
    const auto results = codegen.emit(expr, [](int, int) { throw KernelError("random: operands are preset"); },
                                      {{0, {ValueType::F32, c[0]}}, {1, {ValueType::F32, c[1]}}});
    const TileValue v = codegen.to_type(results[0], ValueType::F32, false);
    if (v.reg != results[0].reg) codegen.release(results[0]);
    for (int i = 0; i < 2; ++i) {
      if (v.reg != c[i] && results[0].reg != c[i]) vregs.release(c[i]);
    }
    return v;
  });
  for (int x : {k0, k1, scratch}) s.release(x);
  return w.assemble();
}

}  // namespace vtpu::kernels
