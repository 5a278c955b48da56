// Integer floor division by a constant (kernels/integer_division.h) on the simulator against
// Python's rule (floor quotient, remainder with the divisor's sign): values across +-2^24 where
// the f32 estimate rounds, exact multiples, negative divisors.
#include <doctest/doctest.h>

#include <cmath>

#include "kernels/integer_division.h"
#include "kernels/plan.h"
#include "support/numerics.h"
#include "support/run_graph.h"

using namespace vtpu;
using kernels::DType;

TEST_SUITE("kernels") {
  TEST_CASE("floor_divide: quotient and remainder as Python's // and %") {
    std::vector<float> a = {0, 1, -1, 6, -6, 7, -7, 16777215, -16777215, 16777214, -16777213, 12582911, 8388609};
    for (float v : testing::random_floats(200, 5, -16777215.f, 16777215.f)) a.push_back(std::trunc(v));
    const int64_t n = static_cast<int64_t>(a.size());
    for (int64_t b : {1, 2, 3, 7, -1, -2, -5, 1000, 1 << 20, -(1 << 23) + 1}) {
      CAPTURE(b);
      kernels::Graph g;
      const int in = g.input({{n}, DType::F32}, "a");
      const auto r = kernels::floor_divide(g, g.cast(in, DType::I32), b);
      g.mark_output(g.concat({g.cast(r.quotient, DType::F32), g.cast(r.remainder, DType::F32)}, 0));
      kernels::ProgramCache cache;
      const auto plan = kernels::make_plan(g, kernels::FusionStrategy::Greedy, sim::load_chip("v5e"), cache);
      std::vector<double> want(2 * n);
      for (int64_t i = 0; i < n; ++i) {
        const int64_t x = int64_t(a[i]), q = x / b - ((x % b != 0) && ((x < 0) != (b < 0)));
        want[i] = double(q);
        want[n + i] = double(x - q * b);
      }
      VTPU_CHECK_CLOSE(testing::run_graph(g, plan, {{in, a}}), want, 0, 0);
    }
  }

  TEST_CASE("floor_divide refuses a zero divisor") {
    kernels::Graph g;
    const int a = g.input({{4}, DType::I32}, "a");
    CHECK_THROWS_WITH_AS(kernels::floor_divide(g, a, 0), doctest::Contains("division by zero"), kernels::KernelError);
  }
}
