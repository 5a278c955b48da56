// Row scatter-add into zeros: out = zeros([rows, width]); out[index[i]] += src[i] for each i, in
// order, skipping one padding index. This is nn.Embedding's backward (embedding_dense_backward).
// The same kernel combines by max, min or product instead (scatter_reduce's amax, amin, prod),
// starting from that combine's identity (-inf, +inf, 1) in place of zeros.
// Like the gather kernel it reads indices with `sld` and traps (TrapCode::IndexOutOfRange) on one
// outside the table.
#pragma once

#include <cstdint>

#include "isa/program.h"
#include "kernels/codegen/dtype.h"
#include "sim/chip_config.h"

namespace vtpu::kernels {

enum class ScatterCombine : uint8_t { Add, Max, Min, Mul };

struct ScatterAddSpec {
  DType dtype = DType::F32;  // of src and out: f32 or bf16 (combined in f32, rounded once per update)
  int64_t width = 1;         // elements per row
  bool index_pairs = false;  // int64 indices as int32 word pairs (see GatherSpec)
  ScatterCombine combine = ScatterCombine::Add;
};

// Kernel arguments: src ([count, width]), the indices, out ([rows, width]), then three scalars:
// the number of indices, the number of rows, and the padding index (-1: none).
isa::Program make_scatter_add(const ScatterAddSpec& spec, const sim::ChipConfig& chip);

}  // namespace vtpu::kernels
