#include "sim/mxu_product.h"

#include <tbb/parallel_for.h>

#include <cstring>
#include <utility>

namespace vtpu::sim {

namespace {

constexpr int kColumns = 32;       // output columns whose 8 rows of sums stay in registers
constexpr size_t kMaxPending = 256;  // pushes queued at most (2 MiB of rows on a 256-wide MXU)
constexpr size_t kPushesPerTask = 16;  // below this a push is not worth a thread

// sums[r][n] = sum over k (in order, from zero) of rows[r][k] * weights[k][n], for 8 rows.
// Compiled for AVX-512, AVX2 and the portable baseline, picked at load time by the host's CPU.
// No FMA contraction (the sim is built with -ffp-contract=off): a fused multiply-add rounds once
// where the product and the sum round separately, and results would depend on the host.
__attribute__((target_clones("avx512f", "avx2", "default")))
void product_of_push(const float* __restrict rows, const float* __restrict weights, float* __restrict sums, int d) {
  for (int n0 = 0; n0 < d; n0 += kColumns) {
    float block[kSublanes][kColumns] = {};
    for (int k = 0; k < d; ++k) {
      const float* w = weights + static_cast<long>(k) * d + n0;
#pragma GCC unroll 8
      for (int r = 0; r < kSublanes; ++r) {
        const float a = rows[r * d + k];
        for (int n = 0; n < kColumns; ++n) block[r][n] += a * w[n];
      }
    }
    for (int r = 0; r < kSublanes; ++r) std::memcpy(sums + r * d + n0, block[r], sizeof(block[r]));
  }
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
  const auto multiply = [&](size_t first, size_t end) {
    for (size_t p = first; p < end; ++p) {
      product_of_push(mxu.pending_rows.data() + p * push_elements, mxu.weights.data(), sums.data() + p * push_elements, d);
    }
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
}

}  // namespace vtpu::sim
