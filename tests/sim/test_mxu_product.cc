// The MXU's queued products (sim/mxu_product.h) against products taken one push at a time: the
// same bits, whatever the batch (one push, a parallel batch, a queue that fills and runs early),
// with slots pushed many times in an order the adds must keep.
#include <doctest/doctest.h>

#include <cstring>
#include <random>
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
// added to the slot) gives.
std::vector<float> queued(int dim, int slots, int pushes, std::vector<float>& expected) {
  std::mt19937 rng(7);
  MxuState mxu;
  mxu.dim = dim;
  mxu.slots = slots;
  mxu.materialize();
  mxu.weights = random_bf16(size_t(dim) * dim, rng, 1.f);
  mxu.acc = random_bf16(mxu.acc.size(), rng, 100.f);  // slots start non-zero: the add's order shows
  expected = mxu.acc;
  const size_t block = size_t(kSublanes) * dim;
  for (int p = 0; p < pushes; ++p) {
    const std::vector<float> rows = random_bf16(block, rng, 3.f);
    std::memcpy(queue_mxu_push(mxu, p % slots), rows.data(), block * sizeof(float));
    float* acc = expected.data() + size_t(p % slots) * block;
    for (int r = 0; r < kSublanes; ++r) {
      for (int n = 0; n < dim; ++n) {
        float sum = 0.f;
        for (int k = 0; k < dim; ++k) sum += rows[size_t(r) * dim + k] * mxu.weights[size_t(k) * dim + n];
        acc[size_t(r) * dim + n] += sum;
      }
    }
  }
  run_pending_mxu_pushes(mxu);
  CHECK(mxu.pending_slots.empty());
  CHECK(mxu.pending_rows.empty());
  return mxu.acc;
}

}  // namespace

TEST_SUITE("sim") {
  TEST_CASE("queued MXU pushes give the bits of one product per push") {
    for (const int dim : {128, 256}) {
      // 1 push; a batch run across threads; more than the queue holds (it runs early).
      for (const int pushes : {1, 40, 300}) {
        CAPTURE(dim);
        CAPTURE(pushes);
        std::vector<float> expected;
        const std::vector<float> got = queued(dim, 5, pushes, expected);
        REQUIRE(got.size() == expected.size());
        CHECK(std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)) == 0);
      }
    }
  }
}
