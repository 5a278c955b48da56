// The tile loop of the fused elementwise kernel: for each 8-row group and 128-column chunk of a
// block, load the operands, run the expression's code, store the outputs. BlockStream does the
// blocks, DMAs and buffers around it.
#include "kernels/generators/elementwise.h"

#include <fmt/format.h>

#include <bit>
#include <map>

#include "kernels/codegen/asm_writer.h"
#include "kernels/codegen/tile_codegen.h"
#include "kernels/codegen/vreg_shape.h"
#include "kernels/codegen/block_stream.h"

namespace vtpu::kernels {
namespace {

constexpr uint64_t kBlockBudgetBytes = 256 * 1024;  // VMEM per buffer set: big DMAs, short pipeline fill
constexpr int64_t kElementwiseUnroll = 4;            // tiles per chunk-loop iteration (see make_elementwise)

void validate(const ElementwiseSpec& spec) {
  if (spec.expr.outputs().size() != spec.outputs.size()) {
    throw KernelError("elementwise: the expression's outputs and the output dtypes differ in number");
  }
  if (spec.expr.operand_count() > static_cast<int>(spec.inputs.size())) {
    throw KernelError("elementwise: the expression reads an operand that has no input");
  }
  if (spec.outputs.empty()) throw KernelError("elementwise: a kernel without outputs does nothing");
  if (spec.inputs.size() + spec.outputs.size() > kMaxElementwiseOperands) {
    throw KernelError(fmt::format("elementwise: more than {} operands in one kernel (split the fusion group)",
                                  kMaxElementwiseOperands));
  }
}

// Stores `value` as an output of `dtype` at s`cursor`: bool goes through a mask (0/1 bytes),
// int8 keeps the low byte (torch wraps), bf16 rounds to nearest even.
void store_tile(AsmWriter& w, TileCodegen& codegen, const TileValue& value, DType dtype, int cursor, int64_t offset,
                int64_t stride) {
  const TileValue as_mask = dtype == DType::Bool ? codegen.to_type(value, ValueType::Mask, false) : value;
  const TileValue v = codegen.to_type(as_mask, register_type(dtype), false);
  w.line("{} v{}, m0, s{}, {}, {}", store_mnemonic(dtype), v.reg, cursor, offset, stride);
  if (v.reg != as_mask.reg || v.type != as_mask.type) codegen.release(v);
  if (as_mask.reg != value.reg || as_mask.type != value.type) codegen.release(as_mask);
}

// One 8x128 tile `u` chunks past the operands' cursors: the expression's loads, code and stores.
void emit_tile(AsmWriter& w, const ElementwiseSpec& spec, const BlockStream& stream, RegisterPool& vregs,
               RegisterPool& masks, int scratch, const std::vector<int>& cursor, const std::vector<int>& rowbase, int64_t u,
               const std::map<uint32_t, int>& constants) {
  TileCodegen codegen(w, vregs, masks, scratch);
  codegen.use_hoisted_constants(&constants);
  std::vector<std::pair<int, TileValue>> preset;
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    if (stream.scalar_vreg(i) >= 0) preset.push_back({static_cast<int>(i), {register_type(spec.inputs[i].dtype), stream.scalar_vreg(i)}});
  }
  const auto offset = [&](size_t operand) { return u * kLanes * stream.element_bytes(operand); };
  const auto results = codegen.emit(
      spec.expr,
      [&](int operand, int vreg) { load_tile(w, stream, operand, vreg, cursor[operand], rowbase[operand], offset(operand)); },
      preset);
  for (size_t i = 0; i < results.size(); ++i) {
    const size_t out = spec.inputs.size() + i;
    store_tile(w, codegen, results[i], spec.outputs[i], cursor[out], offset(out), stream.row_stride(out));
  }
  for (size_t i = 0; i < results.size(); ++i) {
    bool seen = false;  // the same node may be two outputs
    for (size_t j = 0; j < i; ++j) seen |= results[j].reg == results[i].reg && results[j].type == results[i].type;
    if (!seen) codegen.release(results[i]);
  }
}

// `hoist`: the expression's constants are broadcast once per block rather than once per tile;
// an expression that then runs out of registers is generated again without.
isa::Program generate(const ElementwiseSpec& spec, const sim::ChipConfig& chip, bool hoist) {
  AsmWriter w("elementwise");
  std::vector<StreamOperand> operands;
  for (const auto& in : spec.inputs) operands.push_back({in.dtype, in.layout, false, in.strided});
  for (DType out : spec.outputs) operands.push_back({out, Layout::Full, true});
  BlockStream stream(w, chip, spec.rows, spec.cols, operands, kMaxElementwiseBlockCols, kBlockBudgetBytes, 0, spec.flat);
  RegisterPool vregs("vector registers", 0, 31), masks("mask registers", 1, 7);
  auto& s = w.sregs();
  // Tiles per chunk-loop iteration: the scalar work of a tile (a cursor step per operand, the
  // count and the branch) would otherwise outlast its DMA on chips whose HBM moves a tile in a few
  // cycles (v6e: 4.4 cycles per bf16 tile copied). Chunks past the launch's columns compute
  // garbage inside the block buffers (padded to whole iterations) that is never written back.
  const int64_t chunks_per_row = stream.block_cols_padded() / kLanes;
  int64_t unroll = kElementwiseUnroll;
  while (chunks_per_row % unroll) unroll /= 2;
  const int unroll_shift = std::countr_zero(uint64_t(unroll * kLanes));
  stream.emit(vregs, [&](int set, const BlockExtent& e) {
    const int groups = s.take(), chunks = s.take(), g = s.take(), c = s.take();
    w.line("saddi s{}, s{}, 7", groups, e.rows);
    w.line("sshri s{}, s{}, 3", groups, groups);
    w.line("saddi s{}, s{}, {}", chunks, e.cols, unroll * kLanes - 1);
    w.line("sshri s{}, s{}, {}", chunks, chunks, unroll_shift);
    for (int r : {e.row0, e.col0, e.rows, e.cols}) s.release(r);
    // Per streamed operand: a row base (advancing by 8 rows per group) and, except for Column
    // operands, a cursor (advancing by 128 columns per chunk).
    std::vector<int> rowbase(operands.size(), -1), cursor(operands.size(), -1);
    for (size_t i = 0; i < operands.size(); ++i) {
      if (operands[i].layout == Layout::Scalar) continue;
      rowbase[i] = s.take();
      w.load_immediate(rowbase[i], stream.vmem(i, set));
      if (operands[i].layout != Layout::Column) cursor[i] = s.take();
    }
    std::map<uint32_t, int> constants;
    if (hoist) {
      const int scratch = s.take();
      constants = hoist_constants(w, spec.expr, vregs, scratch);
      s.release(scratch);
    }
    const std::string group_loop = w.new_label("group"), chunk_loop = w.new_label("chunk");
    w.line("sli s{}, 0", g);
    w.place(group_loop);
    for (size_t i = 0; i < operands.size(); ++i) {
      if (cursor[i] >= 0) w.line("smov s{}, s{}", cursor[i], rowbase[i]);
    }
    w.line("sli s{}, 0", c);
    w.place(chunk_loop);
    const int scratch = s.take();
    for (int64_t u = 0; u < unroll; ++u) emit_tile(w, spec, stream, vregs, masks, scratch, cursor, rowbase, u, constants);
    s.release(scratch);
    for (size_t i = 0; i < operands.size(); ++i) {
      if (cursor[i] >= 0) w.line("saddi s{}, s{}, {}", cursor[i], cursor[i], unroll * kLanes * stream.element_bytes(i));
    }
    w.line("saddi s{}, s{}, 1", c, c);
    w.line("blt s{}, s{}, {}", c, chunks, chunk_loop);
    for (size_t i = 0; i < operands.size(); ++i) {
      if (is_rowwise_stored(operands[i].layout)) w.line("saddi s{}, s{}, {}", rowbase[i], rowbase[i], kSublanes * stream.row_stride(i));
      if (operands[i].layout == Layout::Column) w.line("saddi s{}, s{}, {}", rowbase[i], rowbase[i], kSublanes * stream.element_bytes(i));
    }
    w.line("saddi s{}, s{}, 1", g, g);
    w.line("blt s{}, s{}, {}", g, groups, group_loop);
    for (size_t i = 0; i < operands.size(); ++i) {
      if (rowbase[i] >= 0) s.release(rowbase[i]);
      if (cursor[i] >= 0) s.release(cursor[i]);
    }
    for (int r : {groups, chunks, g, c}) s.release(r);
    release_hoisted(constants, vregs);
  });
  return w.assemble();
}

}  // namespace

isa::Program make_elementwise(const ElementwiseSpec& spec, const sim::ChipConfig& chip) {
  validate(spec);
  try {
    return generate(spec, chip, true);
  } catch (const RegisterShortage&) {
    return generate(spec, chip, false);
  }
}

}  // namespace vtpu::kernels
