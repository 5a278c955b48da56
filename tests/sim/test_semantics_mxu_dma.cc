// The MXU's and DMA's functional meaning against scalar reference code written here: weight loads
// and the back buffer, bf16 products accumulated in f32 (int8 in int32), and 2-D strided DMAs.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <random>

#include "sim/bf16.h"
#include "support/run_program.h"

using namespace vtpu;
using testing::Arg;
using testing::HostBuffer;

TEST_SUITE("sim") {
  TEST_CASE("MXU: mxu.lwb fills the back buffer while matmuls use the active weights; mxu.swap switches") {
    std::vector<uint16_t> w(2 * 128 * 128);  // W1 then W2, small integers: every sum is exact
    for (int k = 0; k < 128; ++k) {
      for (int n = 0; n < 128; ++n) {
        w[k * 128 + n] = sim::f32_to_bf16_bits(float((k + n) % 3));
        w[128 * 128 + k * 128 + n] = sim::f32_to_bf16_bits(float((k * n) % 5));
      }
    }
    const std::string src = R"(
.arg w buffer
.arg y buffer
  sarg s1, w
  sarg s3, y
  sli s4, 0
  sli s5, 1
  sli s6, 65536
  dma.h2v dq0, sem0, s4, s1, s5, s6, s6, s6
  sem.wait sem0, 1
  sli s7, 32768
  sli s8, 1.0f
  vbcast v1, s8
  mxu.lw mxu1, s4, 256
  mxu.lwb mxu1, s7, 256     ; W2 into the back buffer: the next matmul still uses W1
  mxu.mm mxu1, v1, 0
  mxu.swap mxu1
  mxu.mm mxu1, v1, 1
  mxu.pop v5, mxu1, 0
  mxu.pop v6, mxu1, 1
  sli s9, 65536
  vst v5, m0, s9, 0, 512
  vst v6, m0, s9, 4096, 512
  sli s8, 8192
  dma.v2h dq0, sem1, s9, s3, s5, s8, s8, s8
  sem.wait sem1, 1
)";
    auto out = testing::run_program(src, {Arg::buf(HostBuffer::of(w)), Arg::buf(HostBuffer::of(std::vector<float>(2048)))});
    const auto y = out.buffers[1].as<float>();
    for (int n = 0; n < 128; ++n) {  // a row of ones times W = W's column sums
      float sum1 = 0, sum2 = 0;
      for (int k = 0; k < 128; ++k) sum1 += float((k + n) % 3), sum2 += float((k * n) % 5);
      for (int r = 0; r < 8; ++r) {
        CHECK(y[r * 128 + n] == sum1);
        CHECK(y[1024 + r * 128 + n] == sum2);
      }
    }
  }

  TEST_CASE("MXU: mxu.lw.t and mxu.lwb.t load W from its transpose (row n of VMEM holds W[.][n])") {
    // VMEM holds M[r][c] = (2r + c) % 5 (not symmetric). A row of ones times W is W's column sums:
    // sum over k of M[n][k] when M is W^T (transposed loads), sum over k of M[k][n] for mxu.lw.
    std::vector<uint16_t> m(128 * 128);
    for (int r = 0; r < 128; ++r) {
      for (int c = 0; c < 128; ++c) m[r * 128 + c] = sim::f32_to_bf16_bits(float((2 * r + c) % 5));
    }
    const std::string src = R"(
.arg w buffer
.arg y buffer
  sarg s1, w
  sarg s3, y
  sli s4, 0
  sli s5, 1
  sli s6, 32768
  dma.h2v dq0, sem0, s4, s1, s5, s6, s6, s6
  sem.wait sem0, 1
  sli s8, 1.0f
  vbcast v1, s8
  mxu.lw.t mxu0, s4, 256
  mxu.mm mxu0, v1, 0
  mxu.lwb.t mxu0, s4, 256
  mxu.lw mxu1, s4, 256
  mxu.mm mxu1, v1, 0
  mxu.swap mxu0
  mxu.mm mxu0, v1, 1
  mxu.pop v5, mxu0, 0
  mxu.pop v6, mxu1, 0
  mxu.pop v7, mxu0, 1
  sli s9, 65536
  vst v5, m0, s9, 0, 512
  vst v6, m0, s9, 4096, 512
  vst v7, m0, s9, 8192, 512
  sli s8, 12288
  dma.v2h dq0, sem1, s9, s3, s5, s8, s8, s8
  sem.wait sem1, 1
)";
    auto out = testing::run_program(src, {Arg::buf(HostBuffer::of(m)), Arg::buf(HostBuffer::of(std::vector<float>(3072)))});
    const auto y = out.buffers[1].as<float>();
    for (int n = 0; n < 128; ++n) {
      float row_sum = 0, column_sum = 0;
      for (int k = 0; k < 128; ++k) row_sum += float((2 * n + k) % 5), column_sum += float((2 * k + n) % 5);
      CHECK(y[n] == row_sum);            // mxu.lw.t
      CHECK(y[1024 + n] == column_sum);  // mxu.lw of the same memory
      CHECK(y[2048 + n] == row_sum);     // mxu.lwb.t, then mxu.swap
    }
  }

  TEST_CASE("MXU: bf16 inputs, f32 accumulation over several pushes; int8 to int32") {
    // W (128x128 bf16) from x, LHS rows from another part of x; acc = L1 @ W + L2 @ W.
    std::mt19937 rng(9);
    std::uniform_real_distribution<float> d(-2, 2);
    std::vector<float> w(128 * 128), l1(1024), l2(1024);
    for (auto& v : w) v = sim::round_to_bf16(d(rng));
    for (auto& v : l1) v = d(rng);  // not bf16: the MXU must round them
    for (auto& v : l2) v = d(rng);
    std::vector<uint16_t> wbits(w.size());
    for (size_t i = 0; i < w.size(); ++i) wbits[i] = sim::f32_to_bf16_bits(w[i]);
    std::vector<float> lhs = l1;
    lhs.insert(lhs.end(), l2.begin(), l2.end());
    const std::string src = R"(
.arg w buffer
.arg l buffer
.arg y buffer
  sarg s1, w
  sarg s2, l
  sarg s3, y
  sli s4, 0
  sli s5, 1
  sli s6, 32768
  dma.h2v dq0, sem0, s4, s1, s5, s6, s6, s6
  sli s7, 32768
  sli s8, 8192
  dma.h2v dq1, sem0, s7, s2, s5, s8, s8, s8
  sem.wait sem0, 2
  mxu.lw mxu2, s4, 256
  vld v1, m0, s7, 0, 512
  vld v2, m0, s7, 4096, 512
  mxu.mm mxu2, v1, 3
  mxu.mm mxu2, v2, 3
  mxu.pop v5, mxu2, 3
  mxu.pop v6, mxu2, 3      ; popping clears the slot
  sli s9, 65536
  vst v5, m0, s9, 0, 512
  vst v6, m0, s9, 4096, 512
  dma.v2h dq0, sem1, s9, s3, s5, s8, s8, s8
  sem.wait sem1, 1
)";
    auto out = testing::run_program(src, {Arg::buf(HostBuffer::of(wbits)), Arg::buf(HostBuffer::of(lhs)),
                                          Arg::buf(HostBuffer::of(std::vector<float>(2048)))});
    const auto y = out.buffers[2].as<float>();
    for (int r = 0; r < 8; ++r) {
      for (int n = 0; n < 128; ++n) {
        double ref = 0, mag = 0;
        for (int k = 0; k < 128; ++k) {
          const double p = double(sim::round_to_bf16(l1[r * 128 + k])) * w[k * 128 + n] +
                           double(sim::round_to_bf16(l2[r * 128 + k])) * w[k * 128 + n];
          ref += p;
          mag += std::fabs(double(sim::round_to_bf16(l1[r * 128 + k])) * w[k * 128 + n]) +
                 std::fabs(double(sim::round_to_bf16(l2[r * 128 + k])) * w[k * 128 + n]);
        }
        // f32 accumulation of exact products: error <= (terms) * 2^-24 * sum|p|.
        CHECK(std::fabs(y[r * 128 + n] - ref) <= 256 * std::ldexp(1.0, -24) * mag);
        CHECK(y[1024 + r * 128 + n] == 0.0f);
      }
    }
    CHECK(out.result.summary.flops == doctest::Approx(2.0 * 2 * 8 * 128 * 128));

    // int8: weights and LHS in [-128, 127], exact int32 result.
    std::vector<int8_t> w8(128 * 128);
    std::vector<int32_t> lhs8(1024);
    for (auto& v : w8) v = static_cast<int8_t>(static_cast<int>(rng() % 256) - 128);
    for (auto& v : lhs8) v = static_cast<int>(rng() % 256) - 128;
    const std::string src8 = R"(
.arg w buffer
.arg l buffer
.arg y buffer
  sarg s1, w
  sarg s2, l
  sarg s3, y
  sli s4, 0
  sli s5, 1
  sli s6, 16384
  dma.h2v dq0, sem0, s4, s1, s5, s6, s6, s6
  sli s7, 32768
  sli s8, 4096
  dma.h2v dq1, sem0, s7, s2, s5, s8, s8, s8
  sem.wait sem0, 2
  mxu.lw.i8 mxu0, s4, 128
  vld v1, m0, s7, 0, 512
  mxu.mm.i8 mxu0, v1, 0
  mxu.pop v5, mxu0, 0
  sli s9, 65536
  vst v5, m0, s9, 0, 512
  dma.v2h dq0, sem1, s9, s3, s5, s8, s8, s8
  sem.wait sem1, 1
)";
    auto out8 = testing::run_program(src8, {Arg::buf(HostBuffer::of(w8)), Arg::buf(HostBuffer::of(lhs8)),
                                            Arg::buf(HostBuffer::of(std::vector<int32_t>(1024)))});
    const auto y8 = out8.buffers[2].as<int32_t>();
    for (int r = 0; r < 8; ++r) {
      for (int n = 0; n < 128; ++n) {
        int32_t ref = 0;
        for (int k = 0; k < 128; ++k) ref += lhs8[r * 128 + k] * w8[k * 128 + n];
        CHECK(y8[r * 128 + n] == ref);
      }
    }
  }

  TEST_CASE("2-D strided DMA moves exactly the described rows") {
    std::vector<float> x(64 * 64);
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(i);
    // Copy the 10 x 16 sub-block at (row 3, col 5) of a 64x64 matrix into a dense 10x16 buffer.
    const std::string src = R"(
.arg x buffer
.arg y buffer
  sarg s1, x
  sarg s2, y
  saddi s1, s1, (3 * 64 + 5) * 4
  sli s3, 0
  sli s4, 10
  sli s5, 64
  sli s6, 256
  sli s7, 64
  dma.h2v dq0, sem0, s3, s1, s4, s5, s7, s6
  sem.wait sem0, 1
  dma.v2h dq1, sem0, s3, s2, s4, s5, s5, s5
  sem.wait sem0, 1
)";
    auto out = testing::run_program(src, {Arg::buf(HostBuffer::of(x)), Arg::buf(HostBuffer::of(std::vector<float>(160)))});
    const auto y = out.buffers[1].as<float>();
    for (int r = 0; r < 10; ++r) {
      for (int c = 0; c < 16; ++c) CHECK(y[r * 16 + c] == x[(3 + r) * 64 + 5 + c]);
    }
  }
}
