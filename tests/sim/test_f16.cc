// The chip's f16 conversions (sim/f16.h) against IEEE binary16 computed in double arithmetic.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "sim/f16.h"

namespace {

// The value an f16 bit pattern denotes, from its fields.
double f16_value(uint16_t h) {
  const int sign = h >> 15, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  double v;
  if (exponent == 0x1f) {
    v = mantissa ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else if (exponent == 0) {
    v = std::ldexp(double(mantissa), -24);
  } else {
    v = std::ldexp(double(1024 + mantissa), exponent - 25);
  }
  return sign ? -v : v;
}

// f32 rounded to the nearest f16 (ties to even), as a double: the quantum is 2^(e-10) for the
// value's binade e, never below the subnormals' 2^-24; past the largest finite (65504) plus half
// a quantum it is inf.
double nearest_f16(float x) {
  const double v = x;
  if (std::isnan(v) || std::isinf(v)) return v;
  if (std::fabs(v) >= 65520.0) return std::copysign(std::numeric_limits<double>::infinity(), v);
  if (v == 0) return v;
  const int binade = std::max(std::ilogb(v), -14);
  const double quantum = std::ldexp(1.0, binade - 10);
  return std::copysign(std::nearbyint(v / quantum) * quantum, v);  // nearbyint: ties to even
}

}  // namespace

TEST_SUITE("f16") {
  TEST_CASE("every f16 widens to its value, and narrows back to itself") {
    for (uint32_t h = 0; h < 0x10000; ++h) {
      const float wide = vtpu::sim::f16_bits_to_f32(uint16_t(h));
      const double want = f16_value(uint16_t(h));
      if (std::isnan(want)) {
        CHECK(std::isnan(wide));
        CHECK((vtpu::sim::f32_to_f16_bits(wide) & 0x7c00) == 0x7c00);  // still NaN: exponent all ones ...
        CHECK((vtpu::sim::f32_to_f16_bits(wide) & 0x3ff) != 0);        // ... and a mantissa
        continue;
      }
      CHECK(double(wide) == want);
      CHECK(std::signbit(wide) == bool(h & 0x8000));
      CHECK(vtpu::sim::f32_to_f16_bits(wide) == h);
    }
  }

  TEST_CASE("f32 narrows to the nearest f16, ties to even, overflow to inf, subnormals kept") {
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> exponent(-30.0f, 17.0f);
    int checked = 0;
    for (int i = 0; i < 200000; ++i) {
      const float x = std::ldexp(std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng), int(exponent(rng)));
      CHECK(double(vtpu::sim::round_to_f16(x)) == nearest_f16(x));
      ++checked;
    }
    // Exact midpoints between neighbouring f16s go to the even one.
    for (uint16_t h : {uint16_t(0x0001), uint16_t(0x03ff), uint16_t(0x3c00), uint16_t(0x3c01), uint16_t(0x7bfe), uint16_t(0x8400)}) {
      const double mid = (f16_value(h) + f16_value(uint16_t(h + 1))) / 2;
      const uint16_t even = (h & 1) ? uint16_t(h + 1) : h;
      CHECK(vtpu::sim::f32_to_f16_bits(float(mid)) == even);
    }
    CHECK(vtpu::sim::f32_to_f16_bits(65504.0f) == 0x7bff);
    CHECK(vtpu::sim::f32_to_f16_bits(65519.99f) == 0x7bff);
    CHECK(vtpu::sim::f32_to_f16_bits(65520.0f) == 0x7c00);  // the tie rounds to even, which is inf
    CHECK(vtpu::sim::f32_to_f16_bits(-1e30f) == 0xfc00);
    CHECK(vtpu::sim::f32_to_f16_bits(std::ldexp(1.0f, -25)) == 0x0000);  // half the smallest subnormal: tie to 0
    CHECK(vtpu::sim::f32_to_f16_bits(std::ldexp(1.5f, -25)) == 0x0001);
    CHECK(vtpu::sim::f32_to_f16_bits(-0.0f) == 0x8000);
    CHECK(checked == 200000);
  }
}
