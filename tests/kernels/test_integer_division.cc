// Integer floor division by a constant and by a tensor of divisors (kernels/compose/integer_division.h)
// on the simulator against Python's rule (floor quotient, remainder with the divisor's sign):
// values across +-2^24 where the f32 estimate rounds, exact multiples, negative divisors, and the
// whole int32 range.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <optional>

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

  namespace {
  // Python's // and % in int64, wrapped to int32 as the chip's words are (INT32_MIN // -1).
  std::pair<int32_t, int32_t> python_divide(int64_t x, int64_t d) {
    const int64_t q = x / d - ((x % d != 0) && ((x < 0) != (d < 0)));
    return {int32_t(uint32_t(q)), int32_t(x - q * d)};
  }
  std::vector<int32_t> int32_samples(uint64_t seed, int count) {
    std::vector<int32_t> out = {INT32_MIN, INT32_MAX, INT32_MIN + 1, INT32_MAX - 1, 0, 1, -1, 1 << 24, (1 << 24) + 1, -(1 << 24) - 1,
                                1 << 30, -(1 << 30), 2147483520, -2147483520, 2147483583};
    std::mt19937_64 random(seed);
    for (int i = 0; i < count; ++i) {
      const int bits = 1 + int(random() % 31);  // every magnitude, not only the largest
      const auto v = int32_t(random() % (uint64_t(1) << bits));
      out.push_back(random() % 2 ? -v : v);
    }
    return out;
  }
  // quotients then remainders, as int32
  std::vector<int32_t> divide_on_chip(const std::vector<int32_t>& a, const std::vector<int32_t>& b,
                                      std::optional<int64_t> constant) {
    const auto inputs = constant ? testing::Int32Inputs{a} : testing::Int32Inputs{a, b};
    return testing::run_int32_graph(inputs, [&](kernels::Graph& g, const std::vector<int>& v) {
      const auto r = constant ? kernels::floor_divide(g, v[0], *constant) : kernels::floor_divide_by(g, v[0], v[1]);
      return g.concat({r.quotient, r.remainder}, 0);
    });
  }
  }  // namespace

  TEST_CASE("floor_divide and floor_divide_by over the whole int32 range") {
    const auto a = int32_samples(11, 300);
    const size_t n = a.size();
    auto divisors = int32_samples(12, int(n) - 15);
    for (auto& d : divisors) d = d == 0 ? 5 : d;
    std::reverse(divisors.begin(), divisors.end());  // the extremes meet random dividends and the reverse
    for (const auto& constant : std::vector<std::optional<int64_t>>{1, -1, 3, -7, 65536, 16777217, -16777219, 123456789, INT32_MAX,
                                                                     INT32_MIN, -2147483583, std::nullopt}) {
      CAPTURE(constant.value_or(0));
      const auto got = divide_on_chip(a, divisors, constant);
      REQUIRE(got.size() == 2 * n);
      for (size_t i = 0; i < n; ++i) {
        const auto [q, r] = python_divide(a[i], constant.value_or(divisors[i]));
        if (got[i] != q || got[n + i] != r) FAIL(a[i], " // ", constant.value_or(divisors[i]), ": got ", got[i], ", ", got[n + i]);
      }
    }
  }

  TEST_CASE("floor_divide refuses a zero divisor") {
    kernels::Graph g;
    const int a = g.input({{4}, DType::I32}, "a");
    CHECK_THROWS_WITH_AS(kernels::floor_divide(g, a, 0), doctest::Contains("division by zero"), kernels::KernelError);
  }
}
