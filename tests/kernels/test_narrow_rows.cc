// Reductions over narrow rows (kernels/generators/rowwise_narrow.cc): values against double
// references for every op, width and row count the transposed blocks meet (partial groups,
// several blocks, widths below the program's), NaN and infinities as torch's CPU gives them, a
// fused prologue, the program shared across a bucket, and the HBM bandwidth they reach (a bound on
// simulated time, v5e and v6e). bench/membound.cc prints more shapes and presets.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "kernels/compose/reduce_dims.h"
#include "kernels/graph/plan.h"
#include "sim/sim_device.h"
#include "support/numerics.h"
#include "support/run_graph.h"

using namespace vtpu;
using kernels::DType;
using kernels::ExprOp;
using kernels::FusionStrategy;
using kernels::RowOp;

namespace {

// Row-wise reference of `op` in double (NaN as torch: any NaN makes the row's max, min and sum NaN).
std::vector<double> reference(const std::vector<float>& x, int64_t rows, int64_t cols, RowOp op) {
  std::vector<double> want(rows);
  for (int64_t r = 0; r < rows; ++r) {
    double acc = op == RowOp::Max ? -INFINITY : op == RowOp::Min ? INFINITY : 0.0;
    bool nan = false;
    for (int64_t c = 0; c < cols; ++c) {
      const double v = x[r * cols + c];
      nan |= std::isnan(v);
      acc = op == RowOp::Max ? std::max(acc, v) : op == RowOp::Min ? std::min(acc, v) : acc + v;
    }
    if (op == RowOp::Mean) acc /= double(cols);
    want[r] = nan ? NAN : acc;
  }
  return want;
}

// The plan of op(x) over the last dim of `x`.
kernels::Plan plan_of(kernels::Graph& g, int x, RowOp op, kernels::ProgramCache& cache, const sim::ChipConfig& chip) {
  g.mark_output(kernels::reduce_dims(g, x, {1}, op));
  return kernels::make_plan(g, FusionStrategy::Greedy, chip, cache);
}

}  // namespace

TEST_SUITE("kernels") {
  TEST_CASE("narrow rows reduce as transposed blocks: every op, width and row count") {
    const auto& chip = sim::load_chip("v5e");
    for (const RowOp op : {RowOp::Sum, RowOp::Mean, RowOp::Max, RowOp::Min}) {
      for (const int64_t cols : {int64_t(1), int64_t(7), int64_t(8), int64_t(31), int64_t(32), int64_t(33), int64_t(50), int64_t(64)}) {
        // One partial group; several groups with a partial last; several blocks.
        for (const int64_t rows : {int64_t(3), int64_t(700), int64_t(9000)}) {
          CAPTURE(kernels::row_op_name(op));
          CAPTURE(cols);
          CAPTURE(rows);
          kernels::Graph g;
          kernels::ProgramCache cache;
          const int x = g.input({{rows, cols}, DType::F32}, "x");
          const auto plan = plan_of(g, x, op, cache, chip);
          REQUIRE(plan.launches.size() == 1);
          CHECK(plan.launches[0].program->name.find("narrow") != std::string::npos);
          const auto xd = testing::random_floats(rows * cols, uint32_t(rows + cols));
          VTPU_CHECK_CLOSE(testing::run_graph(g, plan, {{x, xd}}), reference(xd, rows, cols, op), 1e-5, 1e-5);
        }
      }
    }
  }

  TEST_CASE("narrow rows carry NaN and infinities as torch's CPU does") {
    const int64_t rows = 300, cols = 40;
    auto xd = testing::random_floats(rows * cols, 5);
    const float inf = std::numeric_limits<float>::infinity();
    xd[0 * cols + 3] = NAN;                               // a NaN row
    xd[1 * cols + 0] = inf;                               // +inf alone
    xd[2 * cols + 39] = -inf;                             // -inf in the last column
    xd[3 * cols + 1] = inf, xd[3 * cols + 2] = -inf;      // inf - inf: NaN sums, finite max and min
    xd[257 * cols + 20] = NAN;                            // in the second segment's rows
    for (const RowOp op : {RowOp::Sum, RowOp::Mean, RowOp::Max, RowOp::Min}) {
      CAPTURE(kernels::row_op_name(op));
      kernels::Graph g;
      kernels::ProgramCache cache;
      const int x = g.input({{rows, cols}, DType::F32}, "x");
      const auto plan = plan_of(g, x, op, cache, sim::load_chip("v5e"));
      VTPU_CHECK_CLOSE(testing::run_graph(g, plan, {{x, xd}}), reference(xd, rows, cols, op), 1e-5, 1e-5);
    }
  }

  TEST_CASE("a narrow row sum fuses its prologue; lanes past the row hold the identity, not the prologue's value") {
    // exp(x) + 1 of a padded lane's 0 is 2, which a sum must not see.
    const int64_t rows = 520, cols = 24;
    kernels::Graph g;
    const int x = g.input({{rows, cols}, DType::F32}, "x");
    const int y = g.binary_scalar(ExprOp::Add, g.unary(ExprOp::Exp, x), 1.0);
    g.mark_output(g.row(RowOp::Sum, y));
    kernels::ProgramCache cache;
    const auto plan = kernels::make_plan(g, FusionStrategy::Greedy, sim::load_chip("v5e"), cache);
    REQUIRE(plan.launches.size() == 1);
    CHECK(plan.launches[0].program->name.find("narrow") != std::string::npos);
    const auto xd = testing::random_floats(rows * cols, 11);
    std::vector<double> want(rows, 0.0);
    for (int64_t i = 0; i < rows * cols; ++i) want[i / cols] += std::exp(double(xd[i])) + 1.0;
    VTPU_CHECK_CLOSE(testing::run_graph(g, plan, {{x, xd}}), want, 1e-4, 1e-5);
  }

  TEST_CASE("one narrow program serves every row count and the widths of its bucket") {
    const auto& chip = sim::load_chip("v5e");
    kernels::ProgramCache cache;
    const auto hit = [&](int64_t rows, int64_t cols) {
      kernels::Graph g;
      const auto plan = plan_of(g, g.input({{rows, cols}, DType::F32}, "x"), RowOp::Sum, cache, chip);
      return plan.launches.at(0).cache_hit;
    };
    // Row counts share a program per power of two (the row kernels' bucket), widths per 32 or 64.
    CHECK(!hit(1000, 64));
    CHECK(hit(600, 64));
    CHECK(hit(1000, 33));
    CHECK(!hit(1000, 32));
    CHECK(hit(1000, 1));
    CHECK(hit(513, 20));
  }

  TEST_CASE("narrow row sums keep pace with HBM (v5e, v6e)") {
    // A [262144, 64] bf16 sum: the general row kernel spent a tile, a cross-lane reduction and a
    // store on every 8 rows (v5e 28%, v6e 16% of the sustained bandwidth). The transposed blocks are
    // bound by the transpose's latency on v6e: each group's adds wait for it, and the next
    // group's selects queue behind them on the vector ALUs (docs/membound.md).
    const int64_t rows = 262144, cols = 64;
    for (const std::string chip_name : {"v5e", "v6e"}) {
      CAPTURE(chip_name);
      const auto chip = sim::load_chip(chip_name);
      kernels::Graph g;
      g.mark_output(kernels::reduce_dims(g, g.input({{rows, cols}, DType::BF16}, "x"), {1}, RowOp::Sum));
      const double fraction = (rows * cols + rows) * 2.0 / testing::simulated_seconds(g, chip) / chip.sustained_hbm_bytes_per_s();
      MESSAGE(chip_name, " bf16 sum over rows of 64: ", 100 * fraction, "% of sustained HBM bandwidth");
      CHECK(fraction >= (chip_name == "v5e" ? 0.8 : 0.6));
      CHECK(fraction <= 1.0);
    }
  }
}
