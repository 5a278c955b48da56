// The iota kernel (kernels/generators/iota.h) through the planner: f32 and i32 indices over ragged counts
// (one tile, several staging blocks), with start and step fused into the consumer as arange does.
#include <doctest/doctest.h>

#include "kernels/generators/iota.h"
#include "support/numerics.h"
#include "support/run_graph.h"

using namespace vtpu;
using kernels::DType;
using kernels::ExprOp;

TEST_SUITE("kernels") {
  TEST_CASE("iota: f32 and i32 flat indices, start and step in the consumer") {
    for (int64_t n : {1, 1000, 65536, 70000, 2 * 65536}) {  // block multiples too
      for (DType dtype : {DType::F32, DType::I32}) {
        CAPTURE(n);
        kernels::Graph g;
        const int i = g.iota({{n}, dtype});
        int y = g.binary_scalar(ExprOp::Add, g.binary_scalar(ExprOp::Mul, g.cast(i, DType::F32), 0.5), -3);
        g.mark_output(y);
        kernels::ProgramCache cache;
        const auto plan = kernels::make_plan(g, kernels::FusionStrategy::Greedy, sim::load_chip("v5e"), cache);
        std::vector<double> want(n);
        for (int64_t k = 0; k < n; ++k) want[k] = -3 + 0.5 * double(k);
        VTPU_CHECK_CLOSE(testing::run_graph(g, plan, {}), want, 0, 0);
      }
    }
  }

  TEST_CASE("iota errors") {
    kernels::Graph g;
    CHECK_THROWS_WITH_AS(g.iota({{4}, DType::BF16}), doctest::Contains("f32 or i32"), kernels::KernelError);
    CHECK_THROWS_WITH_AS(g.iota({{int64_t{1} << 25}, DType::F32}), doctest::Contains("2^24"), kernels::KernelError);
    CHECK_THROWS_WITH_AS(kernels::make_iota(DType::I8, sim::load_chip("v5e")), doctest::Contains("f32 or i32"), kernels::KernelError);
  }
}
