// Sorting rows by counting (kernels/compose/sort.h) on the simulator against std::stable_sort with torch's
// order (NaN after +inf, ties in position order): ascending and descending, odd lengths, ties,
// infinities, NaN and signed zeros; the positions must name an element holding the value.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "kernels/graph/plan.h"
#include "kernels/compose/sort.h"
#include "support/numerics.h"
#include "support/run_graph.h"

using namespace vtpu;
using kernels::DType;

namespace {

// Sorted values then positions, [rows, 2n], as the graph's one output packs them.
using SortFn = kernels::SortedRows (*)(kernels::Graph&, int, bool, const std::string&);

std::vector<float> run_sort(const std::vector<float>& x, int64_t rows, int64_t n, bool descending, SortFn sort) {
  kernels::Graph g;
  const int in = g.input({{rows, n}, DType::F32}, "x");
  const auto sorted = sort(g, in, descending, "sort");
  const int values = g.reshape(sorted.values, {rows, n}), positions = g.reshape(sorted.positions, {rows, n});
  g.mark_output(g.concat({values, positions}, 1));
  kernels::ProgramCache cache;
  const auto plan = kernels::make_plan(g, kernels::FusionStrategy::Greedy, sim::load_chip("v5e"), cache);
  return testing::run_graph(g, plan, {{in, x}});
}

// torch's stable order: NaN largest, equal values by position.
std::vector<int> reference_order(const float* row, int64_t n, bool descending) {
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  const auto before = [&](int a, int b) {  // row[a] strictly before row[b]
    const float x = row[a], y = row[b];
    const bool less = x < y || (std::isnan(y) && !std::isnan(x));
    const bool greater = y < x || (std::isnan(x) && !std::isnan(y));
    return descending ? greater : less;
  };
  std::stable_sort(order.begin(), order.end(), before);
  return order;
}

void check(const std::vector<float>& x, int64_t rows, int64_t n, bool descending, SortFn sort = kernels::sort_rows) {
  const auto got = run_sort(x, rows, n, descending, sort);
  for (int64_t r = 0; r < rows; ++r) {
    const auto order = reference_order(&x[r * n], n, descending);
    for (int64_t p = 0; p < n; ++p) {
      const float want = x[r * n + order[p]], value = got[r * 2 * n + p], position = got[r * 2 * n + n + p];
      CAPTURE(r);
      CAPTURE(p);
      CAPTURE(descending);
      if (std::isnan(want)) {
        CHECK(std::isnan(value));
      } else {
        CHECK(value == want);
      }
      CHECK(position == float(order[p]));
    }
  }
}

}  // namespace

TEST_SUITE("kernels") {
  TEST_CASE("sort_rows: random rows of odd lengths, both directions") {
    for (auto [rows, n] : {std::pair<int64_t, int64_t>{1, 1}, {3, 7}, {2, 129}, {16, 16}}) {
      const auto x = testing::random_floats(rows * n, uint32_t(rows * 100 + n));
      for (bool descending : {false, true}) check(x, rows, n, descending);
    }
  }

  TEST_CASE("sort_rows: ties stay in position order; infinities, NaN and signed zeros") {
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    const std::vector<float> x = {2, 1, 2, 1, 2, 0, -0.f, 0,  // ties and zeros of both signs
                                  nan, inf, -inf, 3, nan, -inf, inf, -1};
    for (bool descending : {false, true}) check(x, 2, 8, descending);
  }

  TEST_CASE("bitonic_sort_rows: the same order over lengths that pad to a power of two, ties, NaN, infinities") {
    for (auto [rows, n] : {std::pair<int64_t, int64_t>{1, 1}, {3, 7}, {2, 129}, {1, 1000}}) {
      CAPTURE(n);
      auto x = testing::random_floats(rows * n, uint32_t(rows * 100 + n));
      for (size_t i = 0; i + 3 < x.size(); i += 7) x[i + 3] = x[i];  // ties
      for (bool descending : {false, true}) check(x, rows, n, descending, kernels::bitonic_sort_rows);
    }
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    const std::vector<float> x = {2, 1, 2, 1, 2, 0, -0.f, 0, nan, inf, -inf, 3, nan, -inf, inf, -1, 5, nan, -2};
    for (bool descending : {false, true}) check(x, 1, int64_t(x.size()), descending, kernels::bitonic_sort_rows);
  }

  TEST_CASE("sort_rows: too many compares is refused with the count") {
    kernels::Graph g;
    const int x = g.input({{1, 4096}, DType::F32}, "x");
    CHECK_THROWS_WITH_AS(kernels::sort_rows(g, x, false), doctest::Contains("16777216 compares"), kernels::KernelError);
  }
}
