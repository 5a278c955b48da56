// The HBM forecast of a plan's run (torch_bridge/plan_runner/plan_forecast.h) against the run
// itself: its peak is the device's measured peak, byte for byte, with intermediates in held VMEM,
// in HBM or split between them, outputs allocated as their writers run, and inputs given back
// after their last reader; a chip with one allocation unit less HBM than the forecast cannot run it.
#include <doctest/doctest.h>

#include "kernels/graph/plan.h"
#include "sim/hbm.h"
#include "sim/sim_error.h"
#include "sim/sim_device.h"
#include "torch_bridge/plan_runner/plan_forecast.h"
#include "torch_bridge/plan_runner/plan_runner.h"

using namespace vtpu;
using kernels::DType;
using kernels::ExprOp;

namespace {

// x -> a = exp(x) -> b = a @ w -> c = b + a -> y = c * 2, one launch per op: a lives from the
// first launch to the third, b and c one launch each.
struct Chain {
  kernels::Graph g;
  int x, w, a, y;
  Chain() {
    x = g.input({{256, 512}, DType::F32}, "x");
    w = g.input({{512, 512}, DType::F32}, "w");
    a = g.unary(ExprOp::Exp, x);
    const int c = g.binary(ExprOp::Add, g.matmul(a, w, false, 1), a);
    y = g.binary_scalar(ExprOp::Mul, c, 2.0);
    g.mark_output(y);
  }
};

struct Measured {
  uint64_t forecast = 0;
  int forecast_step = -1;
  uint64_t peak = 0;  // the device's, over the run
};

// Binds the inputs (beside an unrelated 1 MiB buffer the forecast must count), forecasts, runs.
Measured forecast_and_run(const kernels::Plan& plan, const Chain& chain, const sim::ChipConfig& chip, bool release_inputs) {
  sim::SimDevice device(chip);
  device.allocate(1 << 20);
  std::map<int, sim::HbmAddress> bound;
  for (int v : {chain.x, chain.w}) bound[v] = device.allocate(plan.value_bytes.at(v));
  device.reset_peak_memory();
  bridge::ForecastCaller caller;
  caller.output_bytes = [&](int v) { return plan.value_bytes.at(v); };
  if (release_inputs) {
    for (const auto& [v, last] : plan.memory.input_last_step) {
      caller.released_after[last] += device.allocation_bytes(plan.value_bytes.at(v));
    }
  }
  const auto f = bridge::forecast_hbm(plan, device, bound, caller);
  std::function<void(int)> input_done;
  if (release_inputs) input_done = [&](int v) { device.free(bound.at(v)); };
  bridge::PlanExecution exec(device, plan, bound, [&](int v) { return device.allocate(plan.value_bytes.at(v)); },
                             input_done);
  return {f.peak_bytes, f.peak_step, device.memory_stats().peak_allocated_bytes};
}

}  // namespace

TEST_SUITE("kernels") {
  TEST_CASE("the HBM forecast of a plan is the run's measured peak, wherever its intermediates live") {
    Chain chain;
    kernels::ProgramCache cache;
    const auto v5e = sim::load_chip("v5e");
    const auto plan = kernels::make_plan(chain.g, kernels::FusionStrategy::None, v5e, cache);
    REQUIRE(plan.launches.size() == 4);
    const uint64_t act = 256 * 512 * 4;  // a, b, c and y: 512 KiB each
    REQUIRE(plan.memory.intermediates.size() == 3);
    sim::ChipConfig no_held = v5e, one_held = v5e;
    no_held.vmem_held_bytes = 512;    // every intermediate takes HBM
    one_held.vmem_held_bytes = act;   // a is held; b and c take HBM
    const uint64_t before = (1 << 20) + act + 512 * 512 * 4;  // the unrelated buffer, x and w
    for (const bool release : {false, true}) {
      CAPTURE(release);
      for (const auto& chip : {v5e, no_held, one_held}) {
        const auto m = forecast_and_run(plan, chain, chip, release);
        CHECK(m.forecast == m.peak);
      }
    }
    // In held VMEM the intermediates cost no HBM: the peak is the inputs plus y, at the last launch.
    const auto held = forecast_and_run(plan, chain, v5e, false);
    CHECK(held.forecast == before + act);
    CHECK(held.forecast_step == 3);
    // All in HBM: a, b and c live at launch 2 (c = b + a).
    const auto hbm = forecast_and_run(plan, chain, no_held, false);
    CHECK(hbm.forecast == before + 3 * act);
    CHECK(hbm.forecast_step == 2);
    // a held, b and c in HBM.
    CHECK(forecast_and_run(plan, chain, one_held, false).forecast == before + 2 * act);
  }

  TEST_CASE("inputs given back after their last reader lower the forecast peak by their bytes") {
    // x is read by launch 0 only, w by launch 1 only.
    Chain chain;
    kernels::ProgramCache cache;
    const auto v5e = sim::load_chip("v5e");
    const auto plan = kernels::make_plan(chain.g, kernels::FusionStrategy::None, v5e, cache);
    REQUIRE(plan.memory.input_last_step.at(chain.x) == 0);
    REQUIRE(plan.memory.input_last_step.at(chain.w) == 1);
    sim::ChipConfig no_held = v5e;
    no_held.vmem_held_bytes = 512;
    const auto kept = forecast_and_run(plan, chain, no_held, false);
    const auto freed = forecast_and_run(plan, chain, no_held, true);
    CHECK(freed.forecast == freed.peak);
    // Kept, the peak is at launch 2 (a, b and c beside x and w); freed, x (512 KiB) and w (1 MiB)
    // are gone by then, and the peak is launch 0's (x, w and a).
    const uint64_t act = 256 * 512 * 4;
    CHECK(kept.forecast_step == 2);
    CHECK(freed.forecast == kept.forecast - 2 * act);
    CHECK(freed.forecast_step == 0);
  }

  TEST_CASE("a chip with one allocation unit less HBM than the forecast cannot run the plan") {
    Chain chain;
    kernels::ProgramCache cache;
    sim::ChipConfig chip = sim::load_chip("v5e");
    chip.vmem_held_bytes = 512;
    const auto plan = kernels::make_plan(chain.g, kernels::FusionStrategy::None, chip, cache);
    const uint64_t peak = forecast_and_run(plan, chain, chip, false).forecast;
    chip.hbm_bytes = peak;  // exactly enough: it runs
    CHECK(forecast_and_run(plan, chain, chip, false).peak == peak);
    chip.hbm_bytes = peak - sim::Hbm::kAlignment;
    CHECK_THROWS_AS(forecast_and_run(plan, chain, chip, false), sim::OutOfMemoryError);
  }
}
