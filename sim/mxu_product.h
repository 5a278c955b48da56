// The MXU's functional product for one mxu.mm: an 8-row LHS (bf16 values widened to f32) times
// the D x D weights (the same), added to an 8 x D accumulator slot. Each output is the sum over
// k in increasing order, started from zero, then added to the slot: the order Eigen's GEMM used
// here before, so results are bit-identical to it (tests/python/test_host_speed_fingerprint.py)
// while running several times faster on the host (an 8-row product is too small for a general
// GEMM's packing to pay off).
#pragma once

namespace vtpu::sim {

// acc[r][n] += sum_k lhs[r][k] * weights[k][n] for r < 8, n < d; row-major, d a multiple of 32.
void mxu_accumulate_f32(const float* lhs, const float* weights, float* acc, int d);

}  // namespace vtpu::sim
