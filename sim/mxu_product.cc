#include "sim/mxu_product.h"

namespace vtpu::sim {

namespace {
constexpr int kRows = 8;     // an mxu.mm pushes one vreg's 8 sublanes
constexpr int kColumns = 32; // a block of output columns whose 8 rows of partial sums stay in registers
}  // namespace

// Compiled for AVX-512, AVX2 and the portable baseline, picked at load time by the host's CPU.
// No FMA contraction (the sim is built with -ffp-contract=off): a fused multiply-add would round
// once where the product and the sum round separately, and results would depend on the host.
__attribute__((target_clones("avx512f", "avx2", "default")))
void mxu_accumulate_f32(const float* __restrict lhs, const float* __restrict weights, float* __restrict acc, int d) {
  for (int n0 = 0; n0 < d; n0 += kColumns) {
    float sums[kRows][kColumns] = {};
    for (int k = 0; k < d; ++k) {
      const float* w = weights + static_cast<long>(k) * d + n0;
#pragma GCC unroll 8
      for (int r = 0; r < kRows; ++r) {
        const float a = lhs[r * d + k];
        for (int n = 0; n < kColumns; ++n) sums[r][n] += a * w[n];
      }
    }
    for (int r = 0; r < kRows; ++r) {
      for (int n = 0; n < kColumns; ++n) acc[r * d + n0 + n] += sums[r][n];
    }
  }
}

}  // namespace vtpu::sim
