#include "sim/mxu_product.h"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <utility>

namespace vtpu::sim {

namespace {

constexpr int kColumns = 32;       // output columns whose 8 rows of sums stay in registers
constexpr size_t kMaxPending = 256;  // pushes queued at most (2 MiB of rows on a 256-wide MXU)
constexpr size_t kPushesPerTask = 16;  // below this a push is not worth a thread

// For each of `pushes` pushes (8 rows each, one after another in `rows` and `sums`):
// sums[r][n] = sum over k (in order, from zero) of rows[r][k] * weights[k][n]. The pushes share
// each 32-column panel of the weights while it is in the host's L1 cache.
// kFused: each step is one fused multiply-add. It rounds once where a multiply and an add round
// twice, so it is used only where the product is exact (exact_products below), when the two give
// the same bits; the sim is built with -ffp-contract=off so that nothing else is fused.
template <bool kFused>
[[gnu::always_inline]] inline void product_body(const float* __restrict rows, const float* __restrict weights,
                                                float* __restrict sums, int d, size_t pushes) {
  const size_t push_elements = size_t(kSublanes) * d;
  for (int n0 = 0; n0 < d; n0 += kColumns) {
    for (size_t p = 0; p < pushes; ++p) {
      const float* push_rows = rows + p * push_elements;
      float block[kSublanes][kColumns] = {};
      for (int k = 0; k < d; ++k) {
        const float* w = weights + static_cast<long>(k) * d + n0;
#pragma GCC unroll 8
        for (int r = 0; r < kSublanes; ++r) {
          const float a = push_rows[r * d + k];
          for (int n = 0; n < kColumns; ++n) {
            if constexpr (kFused) block[r][n] = __builtin_fmaf(a, w[n], block[r][n]);
            else block[r][n] += a * w[n];
          }
        }
      }
      float* out = sums + p * push_elements;
      for (int r = 0; r < kSublanes; ++r) std::memcpy(out + r * d + n0, block[r], sizeof(block[r]));
    }
  }
}

// Compiled for AVX-512, AVX2 and the portable baseline, picked at load time by the host's CPU.
__attribute__((target_clones("avx512f", "avx2", "default")))
void product_of_pushes(const float* __restrict rows, const float* __restrict weights, float* __restrict sums, int d,
                       size_t pushes) {
  product_body<false>(rows, weights, sums, d, pushes);
}

// Half the instructions of product_of_pushes; called only on hosts with FMA (the baseline clone
// would call the C library's fmaf for every step).
__attribute__((target_clones("avx512f", "arch=haswell", "default")))
void fused_product_of_pushes(const float* __restrict rows, const float* __restrict weights, float* __restrict sums,
                             int d, size_t pushes) {
  product_body<true>(rows, weights, sums, d, pushes);
}

// Vectorised where the host has unsigned vector min and max (SSE2, the baseline, has not): it
// reads every weight once per set of weights, a few percent of the products' time.
__attribute__((target_clones("avx512f", "avx2", "default")))
ExponentRange exponent_range(const float* values, size_t n) {
  // Branch-free, so that it vectorises: masks instead of conditions.
  uint32_t bits = 0, low = 255, high = 0, top = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint32_t u = std::bit_cast<uint32_t>(values[i]);
    const uint32_t field = (u >> 23) & 0xFF;
    const uint32_t e = field | uint32_t(field == 0);          // a subnormal counts as 1
    const uint32_t nonzero = 0u - uint32_t((u << 1) != 0);  // all ones unless +0 or -0
    bits |= u;
    top = std::max(top, field);
    low = std::min(low, e | (~nonzero & 255u));
    high = std::max(high, e & nonzero);
  }
  return {low, high, (bits & 0xFFFF) == 0 && top < 255};
}

// Whether a * b is exact in f32 for every a of one range and b of the other: then a fused
// multiply-add and a multiply followed by an add give the same bits. Two bf16 values have 8-bit
// significands, so their product has at most 16 bits; it is exact unless it overflows (|a| <
// 2^(Ea-126), so |ab| < 2^(Ea+Eb-252), which must stay within 2^128) or has bits below f32's
// smallest subnormal (a's lowest bit is at least 2^(Ea-134), so ab's is at least
// 2^(Ea+Eb-268), which must be 2^-149 or more).
bool exact_products(const ExponentRange& a, const ExponentRange& b) {
  return a.finite_bf16 && b.finite_bf16 && a.max + b.max <= 380 && a.min + b.min >= 119;
}

}  // namespace

float* queue_mxu_push(MxuState& mxu, int slot) {
  if (mxu.pending_slots.size() >= kMaxPending) run_pending_mxu_pushes(mxu);
  const size_t at = mxu.pending_rows.size();
  mxu.pending_rows.resize(at + size_t(kSublanes) * mxu.dim);
  mxu.pending_slots.push_back(slot);
  return mxu.pending_rows.data() + at;
}

void run_pending_mxu_pushes(MxuState& mxu) {
  const size_t pushes = mxu.pending_slots.size();
  if (pushes == 0) return;
  const int d = mxu.dim;
  const size_t push_elements = size_t(kSublanes) * d;
  // Each push's product into its own block of the scratch: the tasks share nothing they write.
  std::vector<float>& sums = mxu.pending_sums;
  sums.resize(pushes * push_elements);
  static const bool host_has_fma = __builtin_cpu_supports("fma");
  const auto products_exact = [&] {  // scans the rows, and the weights once per set
    if (!mxu.weights_range) mxu.weights_range = exponent_range(mxu.weights.data(), mxu.weights.size());
    return exact_products(exponent_range(mxu.pending_rows.data(), pushes * push_elements), *mxu.weights_range);
  };
  const bool fused = host_has_fma && products_exact();  // without FMA nothing is scanned
  const auto multiply = [&](size_t first, size_t end) {
    const float* rows = mxu.pending_rows.data() + first * push_elements;
    float* out = sums.data() + first * push_elements;
    if (fused) fused_product_of_pushes(rows, mxu.weights.data(), out, d, end - first);
    else product_of_pushes(rows, mxu.weights.data(), out, d, end - first);
  };
  if (pushes < 2 * kPushesPerTask) {
    multiply(0, pushes);
  } else {
    tbb::parallel_for(size_t(0), pushes, kPushesPerTask, [&](size_t first) {
      multiply(first, std::min(pushes, first + kPushesPerTask));
    });
  }
  // Added in program order: a slot pushed twice gets its products in the order they were pushed.
  for (size_t p = 0; p < pushes; ++p) {
    float* acc = mxu.acc.data() + size_t(mxu.pending_slots[p]) * push_elements;
    const float* sum = sums.data() + p * push_elements;
    for (size_t i = 0; i < push_elements; ++i) acc[i] += sum[i];
  }
  mxu.pending_rows.clear();
  mxu.pending_slots.clear();
}

void switch_mxu_weights(MxuState& mxu) {
  run_pending_mxu_pushes(mxu);
  std::swap(mxu.weights, mxu.back_weights);
  mxu.weights_range.reset();
}

}  // namespace vtpu::sim
