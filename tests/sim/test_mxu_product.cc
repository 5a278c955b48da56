// The MXU's queued products (sim/mxu_product.h) against products taken one push at a time: the
// same bits, whatever the batch (one push, a parallel batch, a queue that fills and runs early),
// with slots pushed many times in an order the adds must keep, and whatever the values' range
// (the simulator fuses each multiply-add only where the products are exact). This file is built
// with -ffp-contract=off (tests/meson.build): the reference below multiplies, then adds.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "sim/bf16.h"
#include "sim/mxu_product.h"

using namespace vtpu::sim;

namespace {

std::vector<float> random_bf16(size_t n, std::mt19937& rng, float scale) {
  std::normal_distribution<float> d(0, scale);
  std::vector<float> v(n);
  for (float& x : v) x = round_to_bf16(d(rng));
  return v;
}

// Pushes `pushes` random row blocks into slots p % slots, then runs the queue; returns the
// accumulators, and in `expected` what one product per push (sum over k from zero, in order, then
// added to the slot) gives, and in `fused` the same with each step one fused multiply-add.
std::vector<float> queued(int dim, int slots, int pushes, std::vector<float>& expected, std::vector<float>& fused,
                          float weight_scale = 1.f, float row_scale = 3.f, float slot_scale = 100.f) {
  std::mt19937 rng(7);
  MxuState mxu;
  mxu.dim = dim;
  mxu.slots = slots;
  mxu.materialize();
  mxu.back_weights = random_bf16(size_t(dim) * dim, rng, weight_scale);
  switch_mxu_weights(mxu);
  mxu.acc = random_bf16(mxu.acc.size(), rng, slot_scale);  // slots start non-zero: the add's order shows
  expected = mxu.acc;
  fused = mxu.acc;
  const size_t block = size_t(kSublanes) * dim;
  for (int p = 0; p < pushes; ++p) {
    const std::vector<float> rows = random_bf16(block, rng, row_scale);
    std::memcpy(queue_mxu_push(mxu, p % slots), rows.data(), block * sizeof(float));
    for (int r = 0; r < kSublanes; ++r) {
      for (int n = 0; n < dim; ++n) {
        float sum = 0.f, fused_sum = 0.f;
        for (int k = 0; k < dim; ++k) {
          const float a = rows[size_t(r) * dim + k], w = mxu.weights[size_t(k) * dim + n];
          sum += a * w;
          fused_sum = std::fma(a, w, fused_sum);
        }
        const size_t at = size_t(p % slots) * block + size_t(r) * dim + n;
        expected[at] += sum;
        fused[at] += fused_sum;
      }
    }
  }
  run_pending_mxu_pushes(mxu);
  CHECK(mxu.pending_slots.empty());
  CHECK(mxu.pending_rows.empty());
  return mxu.acc;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_SUITE("sim") {
  TEST_CASE("queued MXU pushes give the bits of one product per push") {
    for (const int dim : {128, 256}) {
      // 1 push; a batch run across threads; more than the queue holds (it runs early).
      for (const int pushes : {1, 40, 300}) {
        CAPTURE(dim);
        CAPTURE(pushes);
        std::vector<float> expected, fused;
        const std::vector<float> got = queued(dim, 5, pushes, expected, fused);
        CHECK(same_bits(got, expected));
        // Every product of these values is exact, so a fused multiply-add gives the same bits.
        CHECK(same_bits(fused, expected));
      }
    }
  }

  TEST_CASE("MXU products that are not exact in f32 keep the separate rounding of multiply and add") {
    // 2^-70 x 2^-70: products below f32's normal range lose bits, so a fused multiply-add, which
    // keeps them, rounds differently. 2^64 x 2^64: products overflow to infinity one by one, and
    // opposite infinities make NaN where a fused sum stays infinite. (The slots start near the
    // sums, which would vanish in larger values.)
    for (const auto& [scale, slot_scale] : {std::pair{0x1p-70f, 0x1p-136f}, std::pair{0x1p64f, 1.f}}) {
      CAPTURE(scale);
      std::vector<float> expected, fused;
      const std::vector<float> got = queued(128, 5, 40, expected, fused, scale, scale, slot_scale);
      CHECK_FALSE(same_bits(fused, expected));  // the values do tell the two apart
      CHECK(same_bits(got, expected));
    }
  }
}
