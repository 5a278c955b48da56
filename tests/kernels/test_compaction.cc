// Stream compaction (kernels/compose/compaction.h) on the simulator against a host loop: masks of odd
// lengths (a partial last row of 128, several rows, more rows than one scan takes), all true,
// one true, dense and sparse; and the first `size` positions (nonzero_static's), none true too.
#include <doctest/doctest.h>

#include <tuple>

#include "kernels/compose/compaction.h"
#include "kernels/graph/plan.h"
#include "support/numerics.h"
#include "support/run_graph.h"

using namespace vtpu;
using kernels::DType;

TEST_SUITE("kernels") {
  TEST_CASE("true_positions: the flat positions of true elements, in order") {
    for (auto [n, density] : {std::pair<int64_t, float>{1, 1.f}, {7, 0.5f}, {129, 0.3f}, {1000, 1.f}, {5000, 0.02f}, {300, 0.9f}, {140000, 0.7f}}) {
      CAPTURE(n);
      CAPTURE(density);
      const auto noise = testing::random_floats(n, uint32_t(n), 0.f, 1.f);
      std::vector<float> mask(n);
      std::vector<double> want;
      for (int64_t i = 0; i < n; ++i) {
        mask[i] = noise[i] < density ? 1.f : 0.f;
        if (mask[i] != 0) want.push_back(double(i));
      }
      if (want.empty()) continue;  // the bridge answers an empty count without the chip
      kernels::Graph g;
      const int in = g.input({{n}, DType::F32}, "mask");
      const int bools = g.cast(in, DType::Bool);
      g.mark_output(kernels::true_positions(g, bools, int64_t(want.size())));
      kernels::ProgramCache cache;
      const auto plan = kernels::make_plan(g, kernels::FusionStrategy::Greedy, sim::load_chip("v5e"), cache);
      VTPU_CHECK_CLOSE(testing::run_graph(g, plan, {{in, mask}}), want, 0, 0);
    }
  }

  TEST_CASE("first_true_positions: the first `size` true positions, -1 past the count") {
    for (auto [n, density, size] : {std::tuple<int64_t, float, int64_t>{7, 0.5f, 2}, {129, 0.3f, 100}, {5000, 0.02f, 64},
                                    {1000, 1.f, 1000}, {300, 0.f, 3}, {140000, 0.7f, 5}}) {
      CAPTURE(n);
      CAPTURE(size);
      const auto noise = testing::random_floats(n, uint32_t(n + 1), 0.f, 1.f);
      std::vector<float> mask(n);
      std::vector<double> want;
      for (int64_t i = 0; i < n; ++i) {
        mask[i] = noise[i] < density ? 1.f : 0.f;
        if (mask[i] != 0 && int64_t(want.size()) < size) want.push_back(double(i));
      }
      want.resize(size, -1.0);
      kernels::Graph g;
      const int in = g.input({{n}, DType::F32}, "mask");
      g.mark_output(kernels::first_true_positions(g, g.cast(in, DType::Bool), size));
      kernels::ProgramCache cache;
      const auto plan = kernels::make_plan(g, kernels::FusionStrategy::Greedy, sim::load_chip("v5e"), cache);
      VTPU_CHECK_CLOSE(testing::run_graph(g, plan, {{in, mask}}), want, 0, 0);
    }
  }

  TEST_CASE("true_positions refuses masks past its limit and counts it cannot hold") {
    kernels::Graph g;
    const int big = g.input({{kernels::kCompactionMaxElements + 1}, DType::Bool}, "big");
    CHECK_THROWS_WITH_AS(kernels::true_positions(g, big, 1), doctest::Contains("at most"), kernels::KernelError);
    const int small = g.input({{4}, DType::Bool}, "small");
    CHECK_THROWS_WITH_AS(kernels::true_positions(g, small, 5), doctest::Contains("5 true elements of 4"), kernels::KernelError);
  }
}
