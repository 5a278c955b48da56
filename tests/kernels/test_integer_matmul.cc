// Integer matmuls on the MXU (kernels/compose/integer_matmul.h) against int32 arithmetic: small
// values in one plane over K slices, any int32 through byte planes (wrapping modulo 2^32 as
// torch's int32 matmul), a batch, and K = 0.
#include <doctest/doctest.h>

#include <random>

#include "kernels/compose/integer_matmul.h"
#include "kernels/graph/plan.h"
#include "support/run_graph.h"

using namespace vtpu;
using kernels::DType;

namespace {

std::vector<int32_t> random_ints(size_t count, int64_t bound, uint64_t seed) {
  std::mt19937_64 random(seed);
  std::vector<int32_t> out(count);
  for (auto& v : out) v = int32_t(int64_t(random() % uint64_t(2 * bound + 1)) - bound);
  return out;
}

// [batch, m, k] @ [batch, k, n] on the chip and in wrapping int32 on the host.
void check_matmul(int64_t batch, int64_t m, int64_t k, int64_t n, int64_t bound, uint64_t seed) {
  INFO("batch ", batch, ", m ", m, ", k ", k, ", n ", n, ", bound ", bound);
  const auto a = random_ints(size_t(batch * m * k), bound, seed), b = random_ints(size_t(batch * k * n), bound, seed + 1);
  kernels::Graph g;
  const int in_a = g.input({{batch, m, k}, DType::I32}, "a"), in_b = g.input({{batch, k, n}, DType::I32}, "b");
  g.mark_output(kernels::integer_matmul(g, in_a, in_b, bound));
  kernels::ProgramCache cache;
  const auto plan = kernels::make_plan(g, kernels::FusionStrategy::Greedy, sim::load_chip("v5e"), cache);
  const auto got = testing::floats_as_int32_bits(
      testing::run_graph(g, plan, {{in_a, testing::int32_bits_as_floats(a)}, {in_b, testing::int32_bits_as_floats(b)}}));
  REQUIRE(got.size() == size_t(batch * m * n));
  for (int64_t s = 0; s < batch; ++s) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        uint32_t want = 0;
        for (int64_t t = 0; t < k; ++t) want += uint32_t(a[(s * m + i) * k + t]) * uint32_t(b[(s * k + t) * n + j]);
        const int32_t got_ij = got[(s * m + i) * n + j];
        if (got_ij != int32_t(want)) FAIL("[", s, ", ", i, ", ", j, "]: got ", got_ij, " want ", int32_t(want));
      }
    }
  }
}

}  // namespace

TEST_SUITE("kernels") {
  TEST_CASE("integer_matmul: small values in K slices whose sums stay exact in f32") {
    check_matmul(1, 5, 2500, 7, 128, 1);  // int8: slices of 1024
    check_matmul(1, 3, 700, 4, 256, 2);   // 256 slices
    check_matmul(2, 4, 9, 3, 9, 3);       // batched, one slice
  }

  TEST_CASE("integer_matmul: any int32 through byte planes, wrapping modulo 2^32") {
    check_matmul(1, 4, 600, 5, INT32_MAX, 4);  // three K slices of 258
    check_matmul(2, 3, 17, 2, 70000, 5);
  }

  TEST_CASE("integer_matmul: K = 0 gives zeros, and it refuses other than int32") {
    check_matmul(1, 2, 0, 3, 5, 6);
    kernels::Graph g;
    const int f = g.input({{2, 2}, DType::F32}, "f");
    CHECK_THROWS_WITH_AS(kernels::integer_matmul(g, f, f, 4), doctest::Contains("takes int32 operands"), kernels::KernelError);
  }
}
