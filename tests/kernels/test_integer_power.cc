// Integer powers (kernels/compose/integer_power.h) against c10's powi on the host, in wrapping
// int32: bases across the range, exponents from -4 to 40, by a tensor and by constants.
#include <doctest/doctest.h>

#include <vector>

#include "kernels/compose/integer_power.h"
#include "kernels/graph/plan.h"
#include "support/run_graph.h"

using namespace vtpu;
using kernels::DType;

namespace {

int32_t powi(int32_t a, int32_t b) {  // c10's powi, wrapping
  if (b < 0) return a == 1 ? 1 : a == -1 ? ((-int64_t(b)) % 2 ? -1 : 1) : 0;
  uint32_t result = 1, base = uint32_t(a);
  for (; b; b /= 2, base *= base) {
    if (b & 1) result *= base;
  }
  return int32_t(result);
}

std::vector<int32_t> on_chip(const std::vector<int32_t>& a, const std::vector<int32_t>& b, std::optional<int64_t> constant) {
  const auto n = int64_t(a.size());
  kernels::Graph g;
  const int in_a = g.input({{n}, DType::I32}, "a"), in_b = g.input({{n}, DType::I32}, "b");
  const int r = constant ? kernels::integer_power_by(g, in_a, *constant) : kernels::integer_power(g, in_a, in_b);
  g.mark_output(r == in_a ? g.binary_scalar(kernels::ExprOp::Add, r, 0) : r);  // a^1 is `a` itself, not a computed output
  kernels::ProgramCache cache;
  const auto plan = kernels::make_plan(g, kernels::FusionStrategy::Greedy, sim::load_chip("v5e"), cache);
  std::vector<testing::Bound> inputs = {{in_a, testing::int32_bits_as_floats(a)}};
  if (!constant) inputs.push_back({in_b, testing::int32_bits_as_floats(b)});
  return testing::floats_as_int32_bits(testing::run_graph(g, plan, inputs));
}

}  // namespace

TEST_SUITE("kernels") {
  TEST_CASE("integer_power: wrapping int32 powers, negative exponents as c10's powi") {
    const std::vector<int32_t> bases = {0, 1, -1, 2, -2, 3, -7, 10, 46341, INT32_MIN, INT32_MAX, 123456789};
    std::vector<int32_t> a, b;
    for (int32_t base : bases) {
      for (int32_t e = -4; e <= 40; ++e) a.push_back(base), b.push_back(e);
    }
    const auto got = on_chip(a, b, std::nullopt);
    REQUIRE(got.size() == a.size());
    for (size_t i = 0; i < a.size(); ++i) {
      if (got[i] != powi(a[i], b[i])) FAIL(a[i], " ** ", b[i], ": got ", got[i], " want ", powi(a[i], b[i]));
    }
    for (int64_t e : {0, 1, 2, 3, 19, 31, 64}) {
      const auto by_constant = on_chip(bases, bases, e);
      for (size_t i = 0; i < bases.size(); ++i) {
        if (by_constant[i] != powi(bases[i], int32_t(e))) FAIL(bases[i], " ** ", e, ": got ", by_constant[i]);
      }
    }
    kernels::Graph g;
    CHECK_THROWS_WITH_AS(kernels::integer_power_by(g, g.input({{2}, DType::I32}, "a"), -1), doctest::Contains("negative"),
                         kernels::KernelError);
  }
}
