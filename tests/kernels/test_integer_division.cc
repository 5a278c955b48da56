// Integer floor division by a constant and by a tensor of divisors (kernels/compose/integer_division.h)
// on the simulator against Python's rule (floor quotient, remainder with the divisor's sign):
// values across +-2^24 where the f32 estimate rounds, exact multiples, negative divisors, and the
// whole int32 range (values built from 16-bit halves, results read back as halves, as f32 holds
// neither exactly).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <tuple>

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
  // int32 words hi * 65536 + lo from f32 halves, and back as (hi, lo) halves exact in f32.
  int word(kernels::Graph& g, int halves, int64_t n) {
    const int hi = g.cast(g.strided_copy(halves, {n}, {1}, 0), DType::I32), lo = g.cast(g.strided_copy(halves, {n}, {1}, n), DType::I32);
    return g.binary(kernels::ExprOp::Add, g.binary_scalar(kernels::ExprOp::Mul, hi, 65536), lo);
  }
  int halves(kernels::Graph& g, int w) {
    return g.concat({g.cast(g.binary_scalar(kernels::ExprOp::Shr, w, 16), DType::F32),
                     g.cast(g.binary_scalar(kernels::ExprOp::BitAnd, w, 65535), DType::F32)}, 0);
  }
  std::vector<float> halves_of(const std::vector<int64_t>& words) {
    std::vector<float> out(2 * words.size());
    for (size_t i = 0; i < words.size(); ++i) {
      const auto u = uint32_t(int32_t(words[i]));
      out[i] = float(int32_t(u) >> 16), out[words.size() + i] = float(u & 65535);
    }
    return out;
  }
  std::vector<double> unsigned_halves_of(const std::vector<int64_t>& words) {
    std::vector<double> out(2 * words.size());
    for (size_t i = 0; i < words.size(); ++i) {
      const auto u = uint32_t(int32_t(words[i]));
      out[i] = double(u >> 16), out[words.size() + i] = double(u & 65535);
    }
    return out;
  }
  // Python's // and % in int64, wrapped to int32 as the chip's words are (INT32_MIN // -1).
  std::pair<int64_t, int64_t> python_divide(int64_t x, int64_t d) {
    const int64_t q = x / d - ((x % d != 0) && ((x < 0) != (d < 0)));
    return {int64_t(int32_t(uint32_t(q))), x - q * d};
  }
  std::vector<int64_t> int32_samples(uint64_t seed, int count) {
    std::vector<int64_t> out = {INT32_MIN, INT32_MAX, INT32_MIN + 1, INT32_MAX - 1, 0, 1, -1, 1 << 24, (1 << 24) + 1, -(1 << 24) - 1,
                                1 << 30, -(1 << 30), 2147483520, -2147483520, 2147483583};
    std::mt19937_64 random(seed);
    for (int i = 0; i < count; ++i) {
      const int bits = 1 + int(random() % 31);  // every magnitude, not only the largest
      const int64_t v = int64_t(random() % (uint64_t(1) << bits));
      out.push_back(random() % 2 ? -v : v);
    }
    return out;
  }
  }  // namespace

  TEST_CASE("floor_divide and floor_divide_by over the whole int32 range") {
    const auto a = int32_samples(11, 300);
    const auto n = int64_t(a.size());
    for (int64_t b : std::vector<int64_t>{1, -1, 3, -7, 65536, 16777217, -16777219, 123456789, INT32_MAX, INT32_MIN, -2147483583}) {
      CAPTURE(b);
      kernels::Graph g;
      const int in = g.input({{2 * n}, DType::F32}, "a_halves");
      const auto r = kernels::floor_divide(g, word(g, in, n), b);
      g.mark_output(g.concat({halves(g, r.quotient), halves(g, r.remainder)}, 0));
      kernels::ProgramCache cache;
      const auto plan = kernels::make_plan(g, kernels::FusionStrategy::Greedy, sim::load_chip("v5e"), cache);
      std::vector<int64_t> q(n), rem(n);
      for (int64_t i = 0; i < n; ++i) std::tie(q[i], rem[i]) = python_divide(a[i], b);
      auto want = unsigned_halves_of(q);
      const auto want_r = unsigned_halves_of(rem);
      want.insert(want.end(), want_r.begin(), want_r.end());
      VTPU_CHECK_CLOSE(testing::run_graph(g, plan, {{in, halves_of(a)}}), want, 0, 0);
    }
    auto divisors = int32_samples(12, int(n) - 15);
    for (auto& d : divisors) d = d == 0 ? 5 : d;
    std::reverse(divisors.begin(), divisors.end());  // the extremes meet random dividends and the reverse
    kernels::Graph g;
    const int in_a = g.input({{2 * n}, DType::F32}, "a_halves"), in_b = g.input({{2 * n}, DType::F32}, "b_halves");
    const auto r = kernels::floor_divide_by(g, word(g, in_a, n), word(g, in_b, n));
    g.mark_output(g.concat({halves(g, r.quotient), halves(g, r.remainder)}, 0));
    kernels::ProgramCache cache;
    const auto plan = kernels::make_plan(g, kernels::FusionStrategy::Greedy, sim::load_chip("v5e"), cache);
    std::vector<int64_t> q(n), rem(n);
    for (int64_t i = 0; i < n; ++i) std::tie(q[i], rem[i]) = python_divide(a[i], divisors[i]);
    auto want = unsigned_halves_of(q);
    const auto want_r = unsigned_halves_of(rem);
    want.insert(want.end(), want_r.begin(), want_r.end());
    VTPU_CHECK_CLOSE(testing::run_graph(g, plan, {{in_a, halves_of(a)}, {in_b, halves_of(divisors)}}), want, 0, 0);
  }

  TEST_CASE("floor_divide refuses a zero divisor") {
    kernels::Graph g;
    const int a = g.input({{4}, DType::I32}, "a");
    CHECK_THROWS_WITH_AS(kernels::floor_divide(g, a, 0), doctest::Contains("division by zero"), kernels::KernelError);
  }
}
