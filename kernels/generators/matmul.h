// The matmul generator: C[b] = epilogue(A[b] @ B[b]) for any M, N, K (ragged edges padded with
// zeros in VMEM), bf16 or f32 operands, B optionally given transposed ([N, K], a Linear weight)
// or shared across the batch, A optionally given transposed ([K, M]), and f32 inputs split into
// bf16 parts for multi-pass precision.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "isa/program.h"
#include "kernels/generators/elementwise.h"
#include "kernels/codegen/vector_expr.h"
#include "sim/chip_config.h"

namespace vtpu::kernels {

// MXU passes for f32 operands, as torch.set_float32_matmul_precision names them: 'medium' = 1
// (bf16 inputs), 'high' = 3 (hi*hi + hi*lo + lo*hi), 'highest' = 6 (three-way split, the terms
// above 2^-24 relative). bf16 operands always take one pass.
int passes_for_precision(std::string_view precision);
// mxu_pass_pairs and bf16_part_count: kernels/codegen/bf16_parts.h.

struct MatmulSpec {
  int64_t batch = 1;
  // The program's capacity; the launch passes the real M, N and K: any M in 1..m, N in 1..n and
  // K in (k_pad - D, k] (k_pad = k rounded up to the MXU size D: the same number of K slices).
  int64_t m = 0, n = 0, k = 0;
  DType a_dtype = DType::BF16;  // A is [batch, M, K] row-major, or [batch, K, M] when a_transposed
  DType b_dtype = DType::BF16;  // B is [batch, K, N], or [batch, N, K] when b_transposed
  DType out_dtype = DType::F32; // C is [batch, M, N]
  bool a_transposed = false;    // A given as its transpose (x^T in a weight gradient x^T @ dy)
  bool b_transposed = false;
  bool b_shared = false;        // one B for every batch entry (a weight)
  int passes = 1;
  // Epilogue: Input 0 of `epilogue` is the f32 accumulator; Input i >= 1 is epilogue_inputs[i-1]
  // (Full = [batch, M, N], Row = [N], Column = [M], Scalar). Without one, C = A @ B.
  std::vector<Operand> epilogue_inputs;
  std::optional<Expr> epilogue;
};

// Kernel arguments: A, B, the epilogue inputs in order, C, then M, N and K (scalars): VMEM is
// sized for spec's capacity and the program runs for any shape within it (it traps, #1, on
// others; matmul_scalars checks first).
isa::Program make_matmul(const MatmulSpec& spec, const sim::ChipConfig& chip);

// The launch scalars {M, N, K} of a launch of `spec`'s program; throws KernelError when the shape
// is outside what the program serves.
std::vector<int32_t> matmul_scalars(const MatmulSpec& spec, const sim::ChipConfig& chip, int64_t m, int64_t n, int64_t k);
}  // namespace vtpu::kernels
