// Philox4x32-10 on the chip: the reference generator against Random123's known-answer vectors,
// the kernel's uniforms bit for bit against it (across staging blocks and ragged tails), its
// normals against Box-Muller in double, bf16 outputs, and the moments of a large draw.
#include <doctest/doctest.h>

#include <cmath>

#include "kernels/generators/random.h"
#include "sim/bf16.h"
#include "support/run_program.h"

using namespace vtpu;
using kernels::DType;
using kernels::RandomKind;

namespace {

constexpr std::array<uint32_t, 2> kKey = {0x12345678u, 0x9abcdef0u};

template <typename T>
std::vector<T> draw(const kernels::RandomSpec& spec, int64_t n, std::array<uint32_t, 2> key = kKey) {
  auto out = testing::run_program(kernels::make_random(spec, sim::load_chip("v5e")),
                                  {testing::Arg::buf(testing::HostBuffer::of(std::vector<T>(n))),
                                   testing::Arg::buf(testing::HostBuffer::of(std::vector<uint32_t>{key[0], key[1]})),
                                   testing::Arg::val(int32_t(n))});
  return out.buffers[0].template as<T>();
}

// The uniform the kernel derives from a Philox word: its top 24 bits on a 2^-24 grid.
double grid(uint32_t word) { return double(word >> 8) * std::ldexp(1.0, -24); }

}  // namespace

TEST_SUITE("kernels") {
  TEST_CASE("Philox4x32-10 reference matches Random123's known-answer vectors") {
    CHECK(kernels::philox4x32_10({0, 0, 0, 0}, {0, 0}) == std::array<uint32_t, 4>{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});
    CHECK(kernels::philox4x32_10({~0u, ~0u, ~0u, ~0u}, {~0u, ~0u}) ==
          std::array<uint32_t, 4>{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd});
    CHECK(kernels::philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}) ==
          std::array<uint32_t, 4>{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1});
  }

  TEST_CASE("uniforms are the reference generator's words, bit for bit, over blocks and tails") {
    for (int64_t n : {1, 1000, 65536 + 1025, 3 * 65536 + 7}) {
      CAPTURE(n);
      const auto got = draw<float>({RandomKind::Uniform, -2.0, 6.0, DType::F32}, n);
      for (int64_t i = 0; i < n; ++i) {
        const float u = float(grid(kernels::philox4x32_10({uint32_t(i), 0, 0, 0}, kKey)[0]));
        const float want = -2.0f + u * 8.0f;  // f32 steps, like the VPU
        if (got[i] != want) {
          FAIL_CHECK("element ", i, ": ", got[i], " != ", want);
          break;
        }
      }
    }
    const auto other_key = draw<float>({RandomKind::Uniform, 0, 1, DType::F32}, 64, {1, 2});
    CHECK(other_key != draw<float>({RandomKind::Uniform, 0, 1, DType::F32}, 64));
  }

  TEST_CASE("normals follow Box-Muller on the same words; bf16 outputs round once; moments of a large draw") {
    const int64_t n = 100000;
    const auto z = draw<float>({RandomKind::Normal, 1.5, 2.0, DType::F32}, n);
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < n; ++i) {
      const auto w = kernels::philox4x32_10({uint32_t(i), 0, 0, 0}, kKey);
      const double u1 = grid(w[0]) + std::ldexp(1.0, -24), u2 = grid(w[1]);
      const double want = 1.5 + 2.0 * std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2);
      if (std::fabs(z[i] - want) > 1e-5 * (1 + std::fabs(want))) {
        FAIL_CHECK("element ", i, ": ", z[i], " vs ", want);
        break;
      }
      sum += z[i];
      sq += (z[i] - 1.5) * (z[i] - 1.5);
    }
    CHECK(std::fabs(sum / n - 1.5) < 0.02);            // 3 standard errors of the mean (2 / sqrt(n))
    CHECK(std::fabs(std::sqrt(sq / n) - 2.0) < 0.02);  // and of the standard deviation
    const auto f = draw<float>({RandomKind::Normal, 0, 1, DType::F32}, 3000);
    const auto bf = draw<uint16_t>({RandomKind::Normal, 0, 1, DType::BF16}, 3000);
    for (int i = 0; i < 3000; ++i) CHECK(bf[i] == sim::f32_to_bf16_bits(f[i]));
  }
}
