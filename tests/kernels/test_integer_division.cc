// Integer floor division by a constant and by a tensor of divisors (kernels/compose/integer_division.h)
// on the simulator against Python's rule (floor quotient, remainder with the divisor's sign):
// values across +-2^24 where the f32 estimate rounds, exact multiples, negative divisors.
#include <doctest/doctest.h>

#include <cmath>

#include "kernels/compose/integer_division.h"
#include "kernels/graph/plan.h"
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

  TEST_CASE("floor_divide_by: a tensor of divisors, each element by its own sign") {
    std::vector<float> a = {0, 1, -1, 6, -6, 7, -7, 16777215, -16777215, 12582911, 8388609, -8388609, 5, -5};
    std::vector<float> b = {1, 2, -2, 3, 3, -3, -3, 7, -7, -1, 1 << 20, -(1 << 23) + 1, 16777215, -16777215};
    for (float v : testing::random_floats(200, 6, -16777215.f, 16777215.f)) a.push_back(std::trunc(v));
    for (float v : testing::random_floats(200, 7, -1000.f, 1000.f)) b.push_back(std::trunc(v) == 0 ? 3.f : std::trunc(v));
    const int64_t n = static_cast<int64_t>(a.size());
    std::vector<float> both(a);
    both.insert(both.end(), b.begin(), b.end());
    kernels::Graph g;
    const int in = g.input({{2, n}, DType::F32}, "a_and_b");
    const int av = g.cast(g.strided_copy(in, {n}, {1}, 0), DType::I32), bv = g.cast(g.strided_copy(in, {n}, {1}, n), DType::I32);
    const auto r = kernels::floor_divide_by(g, av, bv);
    g.mark_output(g.concat({g.cast(r.quotient, DType::F32), g.cast(r.remainder, DType::F32)}, 0));
    kernels::ProgramCache cache;
    const auto plan = kernels::make_plan(g, kernels::FusionStrategy::Greedy, sim::load_chip("v5e"), cache);
    std::vector<double> want(2 * n);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t x = int64_t(a[i]), d = int64_t(b[i]), q = x / d - ((x % d != 0) && ((x < 0) != (d < 0)));
      want[i] = double(q);
      want[n + i] = double(x - q * d);
    }
    VTPU_CHECK_CLOSE(testing::run_graph(g, plan, {{in, both}}), want, 0, 0);
  }

  TEST_CASE("floor_divide refuses a zero divisor") {
    kernels::Graph g;
    const int a = g.input({{4}, DType::I32}, "a");
    CHECK_THROWS_WITH_AS(kernels::floor_divide(g, a, 0), doctest::Contains("division by zero"), kernels::KernelError);
  }
}
