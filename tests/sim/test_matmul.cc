// The hand-written 1024^3 bf16 matmul (examples/matmul_bf16.s) on v5e: numerics against an Eigen
// reference and simulated cycles against the closed-form roofline bound.
#include <doctest/doctest.h>

#include <Eigen/Core>
#include <fstream>
#include <random>
#include <sstream>

#include "sim/bf16.h"
#include "support/run_program.h"

using namespace vtpu;

namespace {

std::string matmul_source() {
  std::ifstream in(std::string(VTPU_SOURCE_DIR) + "/examples/matmul_bf16.s");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct MatmulRun {
  double max_scaled_error = 0;  // |sim - ref| / (K * 2^-24 * sum |a b|), worst element
  testing::RunOutput out;
};

MatmulRun run_matmul(int M, int N, int K) {
  using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  std::mt19937 rng(42);
  std::normal_distribution<float> d(0, 1);
  Mat a(M, K), b(K, N);
  std::vector<uint16_t> abits(size_t(M) * K), bbits(size_t(K) * N);
  for (int i = 0; i < M * K; ++i) {
    abits[i] = sim::f32_to_bf16_bits(d(rng));
    a.data()[i] = sim::bf16_bits_to_f32(abits[i]);
  }
  for (int i = 0; i < K * N; ++i) {
    bbits[i] = sim::f32_to_bf16_bits(d(rng));
    b.data()[i] = sim::bf16_bits_to_f32(bbits[i]);
  }
  MatmulRun run;
  run.out = testing::run_program(matmul_source(),
                                 {testing::Arg::buf(testing::HostBuffer::of(abits)),
                                  testing::Arg::buf(testing::HostBuffer::of(bbits)),
                                  testing::Arg::buf(testing::HostBuffer::of(std::vector<float>(size_t(M) * N)))},
                                 "v5e", {}, {{"M", M}, {"N", N}, {"K", K}});
  // Reference: Eigen's f32 GEMM of the bf16-rounded inputs (products exact, f32 accumulation).
  const Mat ref = a * b;
  const Mat mag = a.cwiseAbs() * b.cwiseAbs();
  const auto c = run.out.buffers[2].as<float>();
  for (int i = 0; i < M * N; ++i) {
    const double bound = 2.0 * K * std::ldexp(1.0, -24) * mag.data()[i] + 1e-30;
    run.max_scaled_error = std::max(run.max_scaled_error, std::fabs(double(c[i]) - ref.data()[i]) / bound);
  }
  return run;
}

}  // namespace

TEST_SUITE("sim") {
  TEST_CASE("small matmul through the same program matches Eigen") {
    const auto run = run_matmul(256, 512, 384);
    // Both sums are f32 over exact products in different orders; each is within K*eps*sum|ab| of
    // the exact value, so their difference is within twice that.
    CHECK(run.max_scaled_error <= 1.0);
  }

  TEST_CASE("1024^3 bf16 matmul on v5e: exact-order-independent numerics and the roofline") {
    const auto run = run_matmul(1024, 1024, 1024);
    CHECK(run.max_scaled_error <= 1.0);
    const auto& s = run.out.result.summary;
    const sim::ChipConfig chip = sim::load_chip("v5e");
    // Closed form: 2*M*N*K FLOP at peak, or the minimum traffic (A and B once in bf16, C once in f32).
    const double flops = 2.0 * 1024 * 1024 * 1024;
    const double min_bytes = 1024.0 * 1024 * (2 + 2 + 4);
    const double bound_s = std::max(flops / chip.model_peak_flops(1), min_bytes / chip.sustained_hbm_bytes_per_s());
    const double simulated_s = s.seconds();
    MESSAGE("simulated ", simulated_s * 1e6, " us, bound ", bound_s * 1e6, " us, ratio ", simulated_s / bound_s);
    CHECK(s.flops == doctest::Approx(flops));
    CHECK(s.hbm_read_bytes + s.hbm_write_bytes == uint64_t(min_bytes));
    CHECK(simulated_s >= bound_s);
    // Within 25% of the bound (~1.20x): what stays exposed is block 0, which must load a whole B
    // panel and its A panel while computing one block, and the last block's write-back.
    CHECK(simulated_s <= 1.25 * bound_s);
  }
}
