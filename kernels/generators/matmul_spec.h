// What a matmul launch computes, as the generator, its schedule and the graph read it:
// C[b] = epilogue(A[b] @ B[b]) with the operands' dtypes and layouts and the program's capacity.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "kernels/codegen/dtype.h"
#include "kernels/codegen/operand.h"
#include "kernels/codegen/vector_expr.h"

namespace vtpu::kernels {

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

}  // namespace vtpu::kernels
