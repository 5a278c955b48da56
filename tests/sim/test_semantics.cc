// Every instruction's functional meaning against scalar reference code written here (the MXU's
// and DMA's in test_semantics_mxu_dma.cc).
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <random>

#include "sim/bf16.h"
#include "sim/f16.h"
#include "support/run_program.h"

using namespace vtpu;
using testing::Arg;
using testing::HostBuffer;

namespace {

// Runs `body` between loading vregs v1, v2, v3 from input buffer x (3 x 1024 f32) and storing
// v10 (and mask m1 as 1.0/0.0 in v11) into output y.
struct VectorCase {
  std::vector<float> out, mask_out;
};

VectorCase vector_case(const std::string& body, const std::vector<float>& x, int32_t scalar = 0) {
  const std::string src = R"(
.arg x buffer
.arg y buffer
.arg k scalar
  sarg s1, x
  sarg s2, y
  sarg s9, k
  sli s3, 0
  sli s4, 1
  sli s5, 12288
  dma.h2v dq0, sem0, s3, s1, s4, s5, s5, s5
  sem.wait sem0, 1
  vld v1, m0, s3, 0, 512
  vld v2, m0, s3, 4096, 512
  vld v3, m0, s3, 8192, 512
  sli s6, 0
  vbcast v11, s6
  sli s6, 1.0f
  vbcast v12, s6
  vmaskn m1, s6
)" + body + R"(
  vsel v11, m1, v12, v11
  sli s7, 16384
  vst v10, m0, s7, 0, 512
  vst v11, m0, s7, 4096, 512
  sli s4, 1
  sli s5, 8192
  dma.v2h dq0, sem1, s7, s2, s4, s5, s5, s5
  sem.wait sem1, 1
)";
  auto out = testing::run_program(src, {Arg::buf(HostBuffer::of(x)), Arg::buf(HostBuffer::of(std::vector<float>(2048))),
                                        Arg::val(scalar)});
  auto y = out.buffers[1].as<float>();
  return {std::vector<float>(y.begin(), y.begin() + 1024), std::vector<float>(y.begin() + 1024, y.end())};
}

std::vector<float> random_inputs(uint32_t seed, float lo = -4, float hi = 4) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> x(3 * 1024);
  for (auto& v : x) v = d(rng);
  return x;
}

template <typename F>
void check_elementwise(const std::string& body, F reference, const std::vector<float>& x, float tol = 0) {
  const auto got = vector_case(body, x).out;
  for (int i = 0; i < 1024; ++i) {
    const float want = reference(x[i], x[1024 + i], x[2048 + i]);
    INFO(body, " element ", i);
    if (std::isnan(want)) {
      CHECK(std::isnan(got[i]));
    } else if (tol == 0) {
      CHECK(got[i] == want);
    } else {
      CHECK(std::fabs(got[i] - want) <= tol * std::max(1.0f, std::fabs(want)));
    }
  }
}

}  // namespace

TEST_SUITE("sim") {
  TEST_CASE("vector f32 arithmetic matches IEEE f32") {
    const auto x = random_inputs(1);
    check_elementwise("  vadd v10, v1, v2", [](float a, float b, float) { return a + b; }, x);
    check_elementwise("  vsub v10, v1, v2", [](float a, float b, float) { return a - b; }, x);
    check_elementwise("  vmul v10, v1, v2", [](float a, float b, float) { return a * b; }, x);
    check_elementwise("  vdiv v10, v1, v2", [](float a, float b, float) { return a / b; }, x);
    check_elementwise("  vmax v10, v1, v2", [](float a, float b, float) { return std::max(a, b); }, x);
    check_elementwise("  vmin v10, v1, v2", [](float a, float b, float) { return std::min(a, b); }, x);
    check_elementwise("  vfma v10, v1, v2, v3", [](float a, float b, float c) { return std::fma(a, b, c); }, x);
    check_elementwise("  vabs v10, v1", [](float a, float, float) { return std::fabs(a); }, x);
    check_elementwise("  vneg v10, v1", [](float a, float, float) { return -a; }, x);
    check_elementwise("  vmov v10, v3", [](float, float, float c) { return c; }, x);
  }

  TEST_CASE("transcendentals") {
    const auto x = random_inputs(2, 0.01f, 6);
    check_elementwise("  vexp v10, v1", [](float a, float, float) { return std::exp(a); }, x);
    check_elementwise("  vlog v10, v1", [](float a, float, float) { return std::log(a); }, x);
    check_elementwise("  vtanh v10, v1", [](float a, float, float) { return std::tanh(a); }, x);
    check_elementwise("  vrsqrt v10, v1", [](float a, float, float) { return 1.0f / std::sqrt(a); }, x);
    check_elementwise("  vrcp v10, v1", [](float a, float, float) { return 1.0f / a; }, x);
  }

  TEST_CASE("compares, masks and select") {
    auto x = random_inputs(3);
    for (int i = 0; i < 1024; i += 7) x[1024 + i] = x[i];  // some equal pairs
    auto sel = [](bool c) { return c ? 1.0f : 0.0f; };
    const std::vector<std::pair<std::string, std::function<bool(float, float)>>> cases = {
        {"vcmp.lt", [](float a, float b) { return a < b; }},
        {"vcmp.le", [](float a, float b) { return a <= b; }},
        {"vcmp.eq", [](float a, float b) { return a == b; }},
        {"vcmp.ne", [](float a, float b) { return a != b; }}};
    for (const auto& [op, f] : cases) {
      const auto got = vector_case("  " + op + " m1, v1, v2\n  vsel v10, m1, v1, v2", x);
      for (int i = 0; i < 1024; ++i) {
        CHECK(got.mask_out[i] == sel(f(x[i], x[1024 + i])));
        CHECK(got.out[i] == (f(x[i], x[1024 + i]) ? x[i] : x[1024 + i]));
      }
    }
    const auto tail = vector_case("  vmaskn m1, s9\n  mnot m2, m1\n  mand m1, m1, m1\n  vsel v10, m2, v1, v2", x, 300);
    for (int i = 0; i < 1024; ++i) {
      CHECK(tail.mask_out[i] == (i < 300 ? 1.0f : 0.0f));
      CHECK(tail.out[i] == (i < 300 ? x[1024 + i] : x[i]));
    }
  }

  TEST_CASE("casts: bf16 round-to-nearest-even, f32<->int32, int8 saturation") {
    std::vector<float> x(3 * 1024);
    std::mt19937 rng(4);
    for (int i = 0; i < 1024; ++i) {
      x[i] = std::bit_cast<float>(static_cast<uint32_t>(rng()) & 0xbfffffffu);  // assorted bit patterns, no inf/nan
      x[1024 + i] = (static_cast<int>(rng() % 2001) - 1000) * 0.37f;
      x[2048 + i] = std::bit_cast<float>(static_cast<int32_t>(rng() % 1001) - 500);
    }
    const auto bf = vector_case("  vcvt.bf16 v10, v1", x).out;
    for (int i = 0; i < 1024; ++i) {
      // Reference: RNE by exact arithmetic on the bits.
      const uint32_t bits = std::bit_cast<uint32_t>(x[i]);
      const uint32_t lower = bits & 0xffffu, upper = bits & 0xffff0000u;
      uint32_t want = upper;
      if (lower > 0x8000u || (lower == 0x8000u && (upper & 0x10000u))) want += 0x10000u;
      CHECK(std::bit_cast<uint32_t>(bf[i]) == want);
    }
    const auto to_int = vector_case("  vcvt.f2i v10, v2", x).out;
    for (int i = 0; i < 1024; ++i) CHECK(std::bit_cast<int32_t>(to_int[i]) == static_cast<int32_t>(x[1024 + i]));
    const auto to_f = vector_case("  vcvt.i2f v10, v3", x).out;
    for (int i = 0; i < 1024; ++i) CHECK(to_f[i] == static_cast<float>(std::bit_cast<int32_t>(x[2048 + i])));
    const auto sat = vector_case("  vcvt.i8 v10, v3", x).out;
    for (int i = 0; i < 1024; ++i) {
      CHECK(std::bit_cast<int32_t>(sat[i]) == std::clamp(std::bit_cast<int32_t>(x[2048 + i]), -128, 127));
    }
    const auto iadd = vector_case("  viadd v10, v3, v3\n  vimul v10, v10, v3", x).out;
    for (int i = 0; i < 1024; ++i) {
      const int32_t a = std::bit_cast<int32_t>(x[2048 + i]);
      CHECK(std::bit_cast<int32_t>(iadd[i]) == 2 * a * a);
    }
    const auto iota = vector_case("  viota v10", x).out;
    for (int i = 0; i < 1024; ++i) CHECK(std::bit_cast<int32_t>(iota[i]) == i);
  }

  TEST_CASE("cross-lane reductions, broadcasts and transpose") {
    const auto x = random_inputs(5);
    const auto sum = vector_case("  vredsum.lane v10, v1", x).out;
    const auto mx = vector_case("  vredmax.lane v10, v1", x).out;
    const auto mn = vector_case("  vredmin.lane v10, v1", x).out;
    for (int s = 0; s < 8; ++s) {
      double ref = 0;
      float m = x[s * 128], n = x[s * 128];
      for (int l = 0; l < 128; ++l) {
        ref += x[s * 128 + l];
        m = std::max(m, x[s * 128 + l]);
        n = std::min(n, x[s * 128 + l]);
      }
      for (int l = 0; l < 128; ++l) {
        CHECK(std::fabs(sum[s * 128 + l] - ref) <= 1e-4 * 128 * 4);  // tree order vs double sum
        CHECK(mx[s * 128 + l] == m);
        CHECK(mn[s * 128 + l] == n);
      }
    }
    const auto ssum = vector_case("  vredsum.sub v10, v1", x).out;
    const auto smax = vector_case("  vredmax.sub v10, v1", x).out;
    for (int l = 0; l < 128; ++l) {
      double ref = 0;
      float m = x[l];
      for (int s = 0; s < 8; ++s) {
        ref += x[s * 128 + l];
        m = std::max(m, x[s * 128 + l]);
      }
      CHECK(std::fabs(ssum[l] - ref) <= 1e-5 * 8 * 4);
      CHECK(smax[5 * 128 + l] == m);
    }
    const auto bl = vector_case("  vbcast.lane v10, v1, 17", x).out;
    const auto bs = vector_case("  vbcast.sub v10, v1, 3", x).out;
    for (int i = 0; i < 1024; ++i) {
      CHECK(bl[i] == x[(i / 128) * 128 + 17]);
      CHECK(bs[i] == x[3 * 128 + i % 128]);
    }
    // Transpose a 128x128 block: fill v13..v28 with row-major values via iota, read back block row 0.
    const auto tr = vector_case(R"(
  viota v13
.rept 15, I
  sli s20, (I + 1) * 1024
  vbcast v30, s20
  viadd v[14 + I], v13, v30
.endr
  vtrans v13, v13
  vmov v10, v14)", x).out;
    // Output vreg 1 holds transposed rows 8..15: T[r][c] = In[c][r] = c*128 + r.
    for (int sl = 0; sl < 8; ++sl) {
      for (int c = 0; c < 128; ++c) CHECK(std::bit_cast<int32_t>(tr[sl * 128 + c]) == c * 128 + (8 + sl));
    }
  }

  TEST_CASE("scalar ALU and branches") {
    const std::string src = R"(
.arg y buffer
.arg a scalar
.arg b scalar
  sarg s1, a
  sarg s2, b
  sadd s10, s1, s2
  ssub s11, s1, s2
  smul s12, s1, s2
  sdiv s13, s1, s2
  srem s14, s1, s2
  sand s15, s1, s2
  sor s16, s1, s2
  sxor s17, s1, s2
  sshli s18, s1, 3
  sshri s19, s1, 2
  smin s20, s1, s2
  smax s21, s1, s2
  sslt s22, s1, s2
  smuli s23, s1, -3
  saddi s24, s1, 100
  sli s25, 0            ; loop: sum 0..9 with blt
  sli s26, 0
  sli s27, 10
loop:
  sadd s25, s25, s26
  saddi s26, s26, 1
  blt s26, s27, loop
  sli s28, 5
  beq s28, s27, wrong
  bne s28, s27, right
wrong:
  sli s28, -1
right:
  sli s3, 0
.rept 19, I
  vbcast v[I % 8], s[10 + I]
  vst v[I % 8], m0, s3, I * 4, 0
.endr
  sarg s4, y
  sli s5, 1
  sli s6, 76
  dma.v2h dq0, sem0, s3, s4, s5, s6, s6, s6
  sem.wait sem0, 1
)";
    const int32_t a = -37, b = 5;
    auto out = testing::run_program(src, {Arg::buf(HostBuffer::of(std::vector<int32_t>(19))), Arg::val(a), Arg::val(b)});
    const auto y = out.buffers[0].as<int32_t>();
    const std::vector<int32_t> want = {a + b, a - b, a * b, a / b, a % b, a & b, a | b, a ^ b,
                                       static_cast<int32_t>(static_cast<uint32_t>(a) << 3),
                                       static_cast<int32_t>(static_cast<uint32_t>(a) >> 2), std::min(a, b),
                                       std::max(a, b), a < b ? 1 : 0, a * -3, a + 100, 45, 10, 10, 5};
    // s26 = 10 after the loop, s27 = 10, s28 = 5 (took the bne branch).
    CHECK(y == want);
  }

  TEST_CASE("strided, masked and narrow loads/stores; bf16 storage rounds") {
    std::vector<float> x(3 * 1024);
    for (int i = 0; i < 3 * 1024; ++i) x[i] = 1.0f + i * 0.001f;
    // Load sublanes 1024 bytes apart (every other 128-row), store them back densely.
    const auto dense = vector_case("  vld v10, m0, s3, 16, 1024", x).out;
    for (int s = 0; s < 8; ++s) {
      for (int l = 0; l < 128; ++l) CHECK(dense[s * 128 + l] == x[4 + s * 256 + l]);
    }
    // Masked load reads 0 outside the mask; masked store leaves memory alone.
    const auto masked = vector_case("  vmaskn m2, s9\n  vld v10, m2, s3, 0, 512", x, 130).out;
    for (int i = 0; i < 1024; ++i) CHECK(masked[i] == (i < 130 ? x[i] : 0.0f));
    const auto kept = vector_case("  vmaskn m2, s9\n  vst v2, m2, s3, 0, 512\n  vld v10, m0, s3, 0, 512", x, 5).out;
    for (int i = 0; i < 1024; ++i) CHECK(kept[i] == (i < 5 ? x[1024 + i] : x[i]));
    const auto bf = vector_case("  vst.bf16 v1, m0, s3, 0, 256\n  vld.bf16 v10, m0, s3, 0, 256", x).out;
    for (int i = 0; i < 1024; ++i) CHECK(bf[i] == sim::round_to_bf16(x[i]));
    // f16 keeps 3 more mantissa bits than bf16 but overflows past 65504: scale some lanes past it.
    std::vector<float> wide = x;
    for (int i = 1024; i < 2048; i += 7) wide[i] *= 60000.0f;
    const auto half = vector_case("  vst.f16 v2, m0, s3, 0, 256\n  vld.f16 v10, m0, s3, 0, 256", wide).out;
    const auto rounded = vector_case("  vcvt.f16 v10, v2", wide).out;
    for (int i = 0; i < 1024; ++i) {
      CHECK(half[i] == sim::round_to_f16(wide[1024 + i]));
      CHECK(rounded[i] == half[i]);
    }
    CHECK(std::isinf(half[0]));
    CHECK(half[1] != sim::round_to_bf16(wide[1025]));  // 2.025 rounds differently to f16 and bf16
    const auto i8 = vector_case("  vcvt.f2i v4, v1\n  vcvt.i8 v4, v4\n  vst.i8 v4, m0, s3, 0, 128\n  vld.i8 v10, m0, s3, 0, 128\n  vcvt.i2f v10, v10", x).out;
    for (int i = 0; i < 1024; ++i) CHECK(i8[i] == static_cast<float>(static_cast<int>(x[i])));
    // bytes of -128..127 loaded both ways: vld.i8 sign-extends (-3), vld.u8 zero-extends (253)
    std::vector<float> bytes(3 * 1024);
    for (int i = 0; i < 3 * 1024; ++i) bytes[i] = static_cast<float>((i * 37) % 256 - 128);
    const std::string store = "  vcvt.f2i v4, v1\n  vst.i8 v4, m0, s3, 0, 128\n";
    const auto as_i8 = vector_case(store + "  vld.i8 v10, m0, s3, 0, 128\n  vcvt.i2f v10, v10", bytes).out;
    const auto as_u8 = vector_case(store + "  vld.u8 v10, m0, s3, 0, 128\n  vcvt.i2f v10, v10", bytes).out;
    for (int i = 0; i < 1024; ++i) {
      CHECK(as_i8[i] == bytes[i]);
      CHECK(as_u8[i] == static_cast<float>(static_cast<int>(bytes[i]) & 0xFF));
    }
  }

  TEST_CASE("vxor, vshri and vimulhu on 32-bit words against 64-bit scalar arithmetic") {
    std::vector<float> x(3 * 1024);
    std::mt19937 rng(5);
    for (auto& v : x) v = std::bit_cast<float>(static_cast<uint32_t>(rng()));  // any bit pattern (NaNs too)
    const auto word = [&](int k, int i) { return std::bit_cast<uint32_t>(x[k * 1024 + i]); };
    const auto bits = [](float f) { return std::bit_cast<uint32_t>(f); };
    const auto x_or = vector_case("  vxor v10, v1, v2", x).out;
    const auto shifted = vector_case("  vshri v10, v1, 8", x).out;
    const auto high = vector_case("  vimulhu v10, v1, v2", x).out;
    for (int i = 0; i < 1024; ++i) {
      CHECK(bits(x_or[i]) == (word(0, i) ^ word(1, i)));
      CHECK(bits(shifted[i]) == word(0, i) >> 8);
      CHECK(bits(high[i]) == uint32_t((uint64_t{word(0, i)} * word(1, i)) >> 32));
    }
  }

  TEST_CASE("sld reads a VMEM word into a scalar register; the word can address the next load") {
    auto x = random_inputs(31);
    x[7] = std::bit_cast<float>(int32_t{4 * 1030});  // element 7 holds the byte address of element 1030
    const auto got = vector_case("  sli s6, 20\n  sld s8, s6, 8\n  sld s8, s8, 0\n  vbcast v10, s8\n", x).out;
    for (int i = 0; i < 1024; ++i) CHECK(got[i] == x[1030]);
  }

}

TEST_SUITE("sim") {
  TEST_CASE("score, sncore and sargw: a .multicore program runs on every TensorCore with its own arguments") {
    // Each core writes (its index, the core count, argument k as it rewrote it to k + 1 + index,
    // scratch slot 9 = the core count) into its own 4-word row of y.
    const std::string src = R"(
.multicore
.arg y buffer
.arg k scalar
  score s1
  sncore s2
  sarg s3, k
  sadd s3, s3, s1
  saddi s3, s3, 1
  sargw k, s3
  sargw 9, s2
  sarg s4, k
  sarg s5, 9
  sli s6, 0
  vbcast v1, s1
  vst v1, m0, s6, 0, 0
  vbcast v1, s2
  vst v1, m0, s6, 4, 0
  vbcast v1, s4
  vst v1, m0, s6, 8, 0
  vbcast v1, s5
  vst v1, m0, s6, 12, 0
  sarg s7, y
  sshli s8, s1, 4
  sadd s7, s7, s8
  sli s9, 1
  sli s10, 16
  dma.v2h dq0, sem0, s6, s7, s9, s10, s10, s10
  sem.wait sem0, 1
)";
    const auto run = [&](const std::string& chip, int cores) {
      sim::SimOptions options;
      options.cores = cores;
      auto out = testing::run_program(src, {Arg::buf(HostBuffer::of(std::vector<int32_t>(8, -1))), Arg::val(100)}, chip, options);
      return out.buffers[0].as<int32_t>();
    };
    // Core 1 reads k = 100, not core 0's 101: each core's arguments are its own.
    CHECK(run("v5p", 0) == std::vector<int32_t>{0, 2, 101, 2, 1, 2, 102, 2});  // v5p: both TensorCores
    CHECK(run("v5p", 1) == std::vector<int32_t>{0, 1, 101, 1, -1, -1, -1, -1});  // forced onto one
    CHECK(run("v5e", 0) == std::vector<int32_t>{0, 1, 101, 1, -1, -1, -1, -1});  // v5e has one
  }
}
