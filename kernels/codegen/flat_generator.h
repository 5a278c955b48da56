// The loop of kernels that compute every element from its flat index alone (random numbers,
// iota): per 8x128 tile a vreg of flat indices (viota + base) goes to the caller's body, whose
// value is stored into one of two VMEM staging buffers; each block of tiles leaves in one DMA
// while the next block computes.
#pragma once

#include <functional>

#include "kernels/codegen/asm_writer.h"
#include "kernels/codegen/tile_codegen.h"
#include "kernels/codegen/dtype.h"
#include "kernels/codegen/vector_expr.h"
#include "sim/chip_config.h"

namespace vtpu::kernels {

// Emits the loop over `count_arg` elements (a scalar argument) written to the buffer argument
// `out_arg` as `out` (f32, bf16 or i32). VMEM from `vmem_base` on holds the staging buffers.
// `tile` gets a vreg of int32 flat indices (its own to consume) and returns the tile's value in
// the type `out` stores from (F32 for floats, I32 for i32).
void emit_flat_generator(AsmWriter& w, const sim::ChipConfig& chip, RegisterPool& vregs, TileCodegen& codegen, DType out,
                         int out_arg, int count_arg, uint64_t vmem_base, const std::function<TileValue(int indices)>& tile);

}  // namespace vtpu::kernels
