// The matmul generator: C[b] = epilogue(A[b] @ B[b]) for any M, N, K (ragged edges padded with
// zeros in VMEM), bf16 or f32 operands, B optionally given transposed ([N, K], a Linear weight)
// or shared across the batch, A optionally given transposed ([K, M]), and f32 inputs split into
// bf16 parts for multi-pass precision.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "isa/program.h"
#include "kernels/generators/matmul_spec.h"
#include "sim/chip_config.h"

namespace vtpu::kernels {

// MXU passes for f32 operands, as torch.set_float32_matmul_precision names them: 'medium' = 1
// (bf16 inputs), 'high' = 3 (hi*hi + hi*lo + lo*hi), 'highest' = 6 (three-way split, the terms
// above 2^-24 relative). bf16 operands always take one pass.
int passes_for_precision(std::string_view precision);
// mxu_pass_pairs and bf16_part_count: kernels/codegen/bf16_parts.h.

// Kernel arguments: A, B, the epilogue inputs in order, C, then M, N and K (scalars): VMEM is
// sized for spec's capacity and the program runs for any shape within it (it traps, #1, on
// others; matmul_scalars checks first).
isa::Program make_matmul(const MatmulSpec& spec, const sim::ChipConfig& chip);

// The launch scalars {M, N, K} of a launch of `spec`'s program; throws KernelError when the shape
// is outside what the program serves.
std::vector<int32_t> matmul_scalars(const MatmulSpec& spec, const sim::ChipConfig& chip, int64_t m, int64_t n, int64_t k);

// The longest K, a multiple of the MXU size, with which a launch like `spec` fits the chip's
// kernel VMEM (each block holds its panels' whole K): spec.k when spec fits, 0 when not even one
// MXU-deep slice does. A longer K is the caller's to split into matmuls whose products it sums.
// With `full_size_blocks`, the longest K that still fits the chip's largest blocks
// (MatmulSchedule::full_size_blocks), past which one launch slows down more than a split costs.
int64_t matmul_max_k(MatmulSpec spec, const sim::ChipConfig& chip, bool full_size_blocks = false);

}  // namespace vtpu::kernels
