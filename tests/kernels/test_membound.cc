// Memory-bound kernels as the planner lowers them: operations without broadcasting stream
// lane-dense over the flat data whatever the tensors' shape (exact values, ragged tails), reach
// the chip's sustained HBM bandwidth on 1-D and 2-D shapes (bounds on simulated time, v5e and
// v6e), and still share one program across the sizes of a bucket. bench/membound.cc prints the
// same measurements over more shapes, sizes and presets (docs/membound.md).
#include <doctest/doctest.h>

#include <functional>
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

namespace {

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace

TEST_SUITE("kernels") {
  TEST_CASE("operations without broadcasting stream lane-dense: any shape, ragged tails, exact values") {
    // Sizes that are not multiples of the stream's rows (2048 or narrower), narrow and 1-D shapes,
    // a scalar operand, and a single element.
    for (const std::vector<int64_t>& shape : std::vector<std::vector<int64_t>>{
             {100003}, {3, 1001}, {70001, 1}, {4099, 64}, {2, 3, 5}, {5}, {1}, {2048 * 9 + 1}}) {
      CAPTURE(shape.size());
      CAPTURE(numel(shape));
      kernels::Graph g;
      const int x = g.input({shape, DType::F32}, "x"), z = g.input({shape, DType::F32}, "z");
      const int s = g.input({{1}, DType::F32}, "s");
      g.mark_output(g.binary(ExprOp::Add, g.binary(ExprOp::Mul, g.binary_scalar(ExprOp::Mul, x, 2.0), s), z));
      const int64_t n = numel(shape);
      const auto xd = testing::random_floats(n, 71), zd = testing::random_floats(n, 72);
      const std::vector<float> sd = {0.75f};
      std::vector<double> want(n);
      for (int64_t i = 0; i < n; ++i) want[i] = double(float(float(xd[i] * 2.f) * 0.75f) + zd[i]);
      kernels::ProgramCache cache;
      const auto plan = kernels::make_plan(g, FusionStrategy::Greedy, sim::load_chip("v5e"), cache);
      REQUIRE(plan.launches.size() == 1);
      bridge::PlanRun run;
      const auto got = testing::run_graph(g, plan, {{x, xd}, {z, zd}, {s, sd}}, &run);
      VTPU_CHECK_CLOSE(got, want, 0, 0);
      // Exactly the bytes of the tensors: the ragged last row is cut, not padded.
      CHECK(run.hbm_read_bytes == uint64_t(2 * n + 1) * 4);
      CHECK(run.hbm_write_bytes == uint64_t(n) * 4);
    }
  }

  TEST_CASE("memory-bound kernels reach the sustained HBM bandwidth, 1-D no slower than 2-D (v5e, v6e)") {
    const int64_t n = 2048 * 1024;  // 8 MiB of f32
    struct Op {
      std::string name;
      std::function<int(kernels::Graph&, int)> build;
      double bytes_per_element;  // read + written
    };
    const Op ops[] = {
        {"clone", [](kernels::Graph& g, int x) { return g.cast(x, DType::F32, "clone"); }, 8},
        {"x + 1", [](kernels::Graph& g, int x) { return g.binary_scalar(ExprOp::Add, x, 1.0); }, 8},
        {"to bf16", [](kernels::Graph& g, int x) { return g.cast(x, DType::BF16); }, 6},
    };
    for (const std::string chip_name : {"v5e", "v6e"}) {
      const auto chip = sim::load_chip(chip_name);
      for (const auto& op : ops) {
        CAPTURE(chip_name);
        CAPTURE(op.name);
        double seconds[2];
        for (int flat = 0; flat < 2; ++flat) {
          kernels::Graph g;
          const int x = g.input({flat ? std::vector<int64_t>{n} : std::vector<int64_t>{2048, 1024}, DType::F32}, "x");
          g.mark_output(op.build(g, x));
          seconds[flat] = testing::simulated_seconds(g, chip);
          const double fraction = n * op.bytes_per_element / seconds[flat] / chip.sustained_hbm_bytes_per_s();
          const std::string what = chip_name + " " + op.name + (flat ? " 1-D: " : " 2-D: ");
          MESSAGE(what, 100 * fraction, "% of sustained HBM bandwidth");
          CHECK(fraction >= 0.95);
          CHECK(fraction <= 1.0);
        }
        CHECK(seconds[1] <= 1.01 * seconds[0]);
      }
      // A row sum reads the tensor once and writes a value per row.
      kernels::Graph g;
      const int x = g.input({{2048, 1024}, DType::F32}, "x");
      g.mark_output(kernels::reduce_dims(g, x, {1}, kernels::RowOp::Sum));
      const double fraction = (n + 2048) * 4.0 / testing::simulated_seconds(g, chip) / chip.sustained_hbm_bytes_per_s();
      const std::string what = chip_name + " row sum: ";
      MESSAGE(what, 100 * fraction, "% of sustained HBM bandwidth");
      CHECK(fraction >= 0.85);
      CHECK(fraction <= 1.0);
    }
  }

  TEST_CASE("v7's two cores keep pace with its HBM: constants broadcast once, long rows on several accumulators") {
    // A bf16 tile reaches a v7 core in about 1.5 cycles. Broadcasting x + 1's constant on every
    // tile chained a broadcast, the add and the rounding behind each other (79% of the sustained
    // bandwidth); one accumulator per row chained a sum's adds 2 cycles apart (60%).
    const auto chip = sim::load_chip("v7");
    const int64_t rows = 4096, cols = 4096, n = rows * cols;  // 32 MiB of bf16
    {
      kernels::Graph g;
      g.mark_output(g.binary_scalar(ExprOp::Add, g.input({{rows, cols}, DType::BF16}, "x"), 1.0));
      const double fraction = n * 4.0 / testing::simulated_seconds(g, chip) / chip.sustained_hbm_bytes_per_s();
      MESSAGE("v7 bf16 x + 1: ", 100 * fraction, "% of sustained HBM bandwidth");
      CHECK(fraction >= 0.9);
      CHECK(fraction <= 1.0);
    }
    {
      kernels::Graph g;
      g.mark_output(kernels::reduce_dims(g, g.input({{rows, cols}, DType::BF16}, "x"), {1}, kernels::RowOp::Sum));
      const double fraction = (n + rows) * 2.0 / testing::simulated_seconds(g, chip) / chip.sustained_hbm_bytes_per_s();
      MESSAGE("v7 bf16 row sum: ", 100 * fraction, "% of sustained HBM bandwidth");
      CHECK(fraction >= 0.75);
      CHECK(fraction <= 1.0);
    }
  }

  TEST_CASE("ragged rows keep pace with HBM: the last iteration's masks are computed once per kernel") {
    // Rows of 1000 bf16 elements end in a masked iteration. Building its masks in every 8-row
    // group chained a broadcast, a compare and a select before each of its adds (v6e 61% of the
    // peak, 73% of the sustained bandwidth).
    const auto chip = sim::load_chip("v6e");
    const int64_t rows = 16 * 1048, cols = 1000;
    kernels::Graph g;
    g.mark_output(kernels::reduce_dims(g, g.input({{rows, cols}, DType::BF16}, "x"), {1}, kernels::RowOp::Sum));
    const double fraction = (rows * cols + rows) * 2.0 / testing::simulated_seconds(g, chip) / chip.sustained_hbm_bytes_per_s();
    MESSAGE("v6e bf16 sum over rows of 1000: ", 100 * fraction, "% of sustained HBM bandwidth");
    CHECK(fraction >= 0.9);
    CHECK(fraction <= 1.0);
  }

  TEST_CASE("a ragged row op whose prologue needs more mask registers than the hoisted masks leave") {
    // sum(where(0 < x & x < 0.5, x, 0)) over rows of 300: the prologue holds two masks at once, so
    // the kernel is generated again with masks built per group; the values must not notice.
    const int64_t rows = 20, cols = 300;
    kernels::Graph g;
    const int x = g.input({{rows, cols}, DType::F32}, "x");
    const int y = g.binary_scalar(ExprOp::Mul, x, 1.0);  // the chain's first node: the rest join its group
    const int inside = g.binary(ExprOp::And, g.binary_scalar(ExprOp::Gt, y, 0.0), g.binary_scalar(ExprOp::Lt, y, 0.5));
    g.mark_output(g.row(kernels::RowOp::Sum, g.where(inside, y, g.binary_scalar(ExprOp::Mul, y, 0.0))));
    const auto xd = testing::random_floats(rows * cols, 13);
    std::vector<double> want(rows, 0.0);
    for (int64_t i = 0; i < rows * cols; ++i) want[i / cols] += (xd[i] > 0.f && xd[i] < 0.5f) ? xd[i] : 0.f;
    kernels::ProgramCache cache;
    const auto plan = kernels::make_plan(g, FusionStrategy::Greedy, sim::load_chip("v5e"), cache);
    CHECK(plan.launches.size() == 1);
    VTPU_CHECK_CLOSE(testing::run_graph(g, plan, {{x, xd}}), want, 1e-5, 1e-5);
  }

  TEST_CASE("a long row's sum on several accumulators is the row's sum") {
    // Rows long enough for one accumulator per chunk of an iteration, a ragged last iteration,
    // and a row whose partials cancel: the pairwise combination must keep every chunk once.
    for (const int64_t cols : {int64_t(4096), int64_t(5000), int64_t(2048 + 3)}) {
      CAPTURE(cols);
      const int64_t rows = 9;
      kernels::Graph g;
      const int x = g.input({{rows, cols}, DType::F32}, "x");
      g.mark_output(kernels::reduce_dims(g, x, {1}, kernels::RowOp::Sum));
      std::vector<float> xd(rows * cols);
      for (int64_t i = 0; i < rows * cols; ++i) xd[i] = float((i * 7919) % 64) - (i % cols == 5 ? 1e4f : 0.f);
      std::vector<double> want(rows, 0.0);
      for (int64_t i = 0; i < rows * cols; ++i) want[i / cols] += xd[i];  // integers: exact in any order
      kernels::ProgramCache cache;
      const auto plan = kernels::make_plan(g, FusionStrategy::Greedy, sim::load_chip("v5e"), cache);
      VTPU_CHECK_CLOSE(testing::run_graph(g, plan, {{x, xd}}), want, 0, 0);
    }
  }

  TEST_CASE("lane-dense programs are shared across the sizes of a bucket") {
    const auto& chip = sim::load_chip("v5e");
    kernels::ProgramCache cache;
    const auto plan_of = [&](std::vector<int64_t> shape) {
      kernels::Graph g;
      g.mark_output(g.unary(ExprOp::Exp, g.input({shape, DType::F32}, "x")));
      const auto plan = kernels::make_plan(g, FusionStrategy::Greedy, chip, cache);
      REQUIRE(plan.launches.size() == 1);
      return plan.launches[0].cache_hit;
    };
    // The program depends on the row width alone, 2048 for anything past 16K elements in its
    // natural bucket: every token count of a [tokens, hidden] activation, long 1-D tensors and
    // narrow columns share one. Small tensors take narrower rows (so they fill eight sublanes),
    // shared by the shapes of one natural bucket.
    CHECK(!plan_of({100, 768}));
    CHECK(plan_of({120, 768}));
    CHECK(plan_of({129, 768}));
    CHECK(plan_of({5000}));
    CHECK(plan_of({3 << 20}));
    CHECK(plan_of({1000, 1}));
    CHECK(!plan_of({5}));
    CHECK(plan_of({100}));
    CHECK(!plan_of({300}));
    CHECK(plan_of({7, 300}));
  }
}
