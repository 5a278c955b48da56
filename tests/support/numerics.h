// Test helpers for numerics: seeded random tensors and a comparison that reports the worst
// element against an |a - b| <= atol + rtol * |b| bound (NaN matches NaN, inf matches inf).
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace vtpu::testing {

inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -3.f, float hi = 3.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

struct Mismatch {
  size_t index = 0;
  double got = 0, want = 0;
  size_t count = 0;
};

inline Mismatch compare(const std::vector<float>& got, const std::vector<double>& want, double atol, double rtol) {
  Mismatch m;
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    const bool same_special = (std::isnan(g) && std::isnan(w)) || (std::isinf(g) && g == w);
    if (same_special) continue;
    if (!(std::fabs(g - w) <= atol + rtol * std::fabs(w))) {
      if (m.count++ == 0) m = {i, g, w, 1};
    }
  }
  return m;
}

#define VTPU_CHECK_CLOSE(GOT, WANT, ATOL, RTOL)                                                        \
  do {                                                                                                \
    const auto vtpu_m = ::vtpu::testing::compare(GOT, WANT, ATOL, RTOL);                              \
    INFO("first mismatch at ", vtpu_m.index, ": got ", vtpu_m.got, " want ", vtpu_m.want, " (",        \
         vtpu_m.count, " mismatches)");                                                               \
    CHECK(vtpu_m.count == 0);                                                                         \
  } while (0)

}  // namespace vtpu::testing
