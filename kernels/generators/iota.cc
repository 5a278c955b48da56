// See iota.h: the flat generator's index vreg is the value (converted for f32).
#include "kernels/generators/iota.h"

#include "kernels/codegen/asm_writer.h"
#include "kernels/codegen/tile_codegen.h"
#include "kernels/codegen/flat_generator.h"

namespace vtpu::kernels {

isa::Program make_iota(DType out, const sim::ChipConfig& chip) {
  if (out != DType::F32 && out != DType::I32) throw KernelError("iota: the output is f32 or i32");
  AsmWriter w("iota");
  const int out_arg = w.argument("out", isa::ArgumentKind::Buffer);
  const int count_arg = w.argument("count", isa::ArgumentKind::Scalar);
  RegisterPool vregs("vector registers", 0, 31), masks("mask registers", 1, 7);
  const int scratch = w.sregs().take();
  TileCodegen codegen(w, vregs, masks, scratch);
  emit_flat_generator(w, chip, vregs, codegen, out, out_arg, count_arg, 0, [&](int indices) {
    if (out == DType::I32) return TileValue{ValueType::I32, indices};
    w.line("vcvt.i2f v{}, v{}", indices, indices);
    return TileValue{ValueType::F32, indices};
  });
  w.sregs().release(scratch);
  return w.assemble();
}

}  // namespace vtpu::kernels
