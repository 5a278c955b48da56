// Timing-only launches (sim::SimOptions::timing_only) skip the functional units but must time
// every data-independent kernel exactly as a full run does: the same cycles, HBM traffic and unit
// activity per kernel, on graphs that cover the main generators. The timing memo must return the
// same results without running, and refuse programs whose timing may depend on data.
#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "isa/assembler.h"
#include "kernels/generators/row_spec.h"
#include "kernels/graph/plan.h"
#include "sim/prepared_program.h"
#include "sim/sim_device.h"
#include "support/numerics.h"
#include "torch_bridge/plan_runner/plan_runner.h"

using namespace vtpu;
using kernels::DType;
using kernels::ExprOp;
using kernels::RowOp;

namespace {

// Runs `plan` on `device`, its inputs filled with random values unless the device is timing only
// (which ignores them).
bridge::PlanRun run_plan(sim::SimDevice& device, const kernels::Plan& plan) {
  std::map<int, sim::HbmAddress> bound;
  uint32_t seed = 5;
  for (const auto& values : {plan.inputs, plan.outputs}) {
    for (int v : values) {
      if (!plan.value_bytes.count(v) || bound.count(v)) continue;
      const uint64_t bytes = plan.value_bytes.at(v);
      bound[v] = device.allocate(bytes);
      const auto data = testing::random_floats((bytes + 3) / 4, seed++);
      device.copy_to_device(bound[v], {reinterpret_cast<const uint8_t*>(data.data()), bytes});
    }
  }
  bridge::PlanExecution exec(device, plan, bound);
  return exec.run();
}

struct Workload {
  const char* name;
  kernels::Graph graph;
};

std::vector<Workload> workloads() {
  std::vector<Workload> all;
  {
    kernels::Graph g;  // a bf16 matmul with ragged sizes, then a bias and GELU-like tanh epilogue
    const int a = g.input({{200, 320}, DType::BF16}, "a"), b = g.input({{320, 260}, DType::BF16}, "b");
    const int bias = g.input({{260}, DType::BF16}, "bias");
    g.mark_output(g.unary(ExprOp::Tanh, g.binary(ExprOp::Add, g.matmul(a, b), bias)));
    all.push_back({"matmul+epilogue", std::move(g)});
  }
  {
    kernels::Graph g;  // f32 matmul at 'highest' precision (several MXU passes)
    const int a = g.input({{128, 256}, DType::F32}, "a"), b = g.input({{256, 384}, DType::F32}, "b");
    g.mark_output(g.matmul(a, b, false, 6));
    all.push_back({"f32 matmul", std::move(g)});
  }
  {
    kernels::Graph g;  // row kernels: softmax, layer norm with weight and bias, a row max
    const int x = g.input({{300, 1000}, DType::F32}, "x");
    const int w = g.input({{1000}, DType::F32}, "w"), bias = g.input({{1000}, DType::F32}, "b");
    g.mark_output(g.row(RowOp::Softmax, x));
    g.mark_output(g.row(RowOp::LayerNorm, x, w, bias));
    g.mark_output(g.row(RowOp::Max, x));
    all.push_back({"rows", std::move(g)});
  }
  {
    kernels::Graph g;  // a comparison feeding a select: masks from data that no load or store uses
    const int x = g.input({{100003}, DType::F32}, "x"), y = g.input({{100003}, DType::F32}, "y");
    g.mark_output(g.where(g.binary(ExprOp::Lt, x, y), x, g.binary_scalar(ExprOp::Mul, y, 0.5)));
    all.push_back({"where", std::move(g)});
  }
  {
    kernels::Graph g;  // causal attention
    const int q = g.input({{8, 256, 64}, DType::BF16}, "q"), k = g.input({{8, 256, 64}, DType::BF16}, "k");
    const int v = g.input({{8, 256, 64}, DType::BF16}, "v");
    g.mark_output(g.attention(q, k, v, true, 0.125, 1, false));
    all.push_back({"attention", std::move(g)});
  }
  return all;
}

}  // namespace

TEST_SUITE("kernels") {
  TEST_CASE("timing-only runs time data-independent kernels exactly as full runs do, and the memo repeats them") {
    for (const char* chip_name : {"v5e", "v6e", "v7"}) {
      const auto chip = sim::load_chip(chip_name);
      for (auto& w : workloads()) {
        const std::string where = std::string(chip_name) + " " + w.name;
        CAPTURE(where);
        kernels::ProgramCache cache;
        const auto plan = kernels::make_plan(w.graph, kernels::FusionStrategy::Greedy, chip, cache);
        sim::SimDevice full(chip), timed(chip);
        REQUIRE(timed.set_timing_only(true));
        const bridge::PlanRun want = run_plan(full, plan);
        for (int repeat = 0; repeat < 2; ++repeat) {  // the second run's launches come from the memo
          const bridge::PlanRun got = run_plan(timed, plan);
          CHECK(got.data_dependent.empty());
          CHECK(got.memo_hits == (repeat ? got.launches : 0));
          CHECK(got.cycles == want.cycles);
          CHECK(got.hbm_read_bytes == want.hbm_read_bytes);
          CHECK(got.hbm_write_bytes == want.hbm_write_bytes);
          CHECK(got.busy_cycles_per_unit == want.busy_cycles_per_unit);
          REQUIRE(got.per_kernel.size() == want.per_kernel.size());
          for (const auto& [label, profile] : want.per_kernel) CHECK(got.per_kernel.at(label).cycles == profile.cycles);
        }
        CHECK(timed.counters().cycles == 2 * full.counters().cycles);
        CHECK(timed.counters().host_to_device_bytes == 2 * full.counters().host_to_device_bytes);  // counted, not moved
      }
    }
  }

  TEST_CASE("a timing-only launch moves no bytes, and the memo answers repeats of data-independent programs") {
    const auto chip = sim::load_chip("v5e");
    sim::SimDevice device(chip);
    device.set_timing_only(true);
    const isa::Program copy = isa::assemble(R"(.name copy
.arg src buffer
.arg dst buffer
.arg rows scalar
  sarg s1, 0
  sarg s2, 1
  sarg s3, 2
  sli s4, 0
  sli s5, 512
  dma.h2v dq0, sem0, s4, s1, s3, s5, s5, s5
  sem.wait sem0, 1
  dma.v2h dq0, sem1, s4, s2, s3, s5, s5, s5
  sem.wait sem1, 1
  halt
)");
    const auto src = device.allocate(512 * 64), dst = device.allocate(512 * 64);
    const std::vector<uint8_t> ones(512 * 64, 1);
    device.copy_to_device(src, ones);
    std::vector<sim::LaunchResult> results;
    for (int rows : {64, 64, 32}) {
      const sim::KernelArg args[] = {sim::KernelArg::buffer(src, 512 * 64), sim::KernelArg::buffer(dst, 512 * 64),
                                     sim::KernelArg::value(rows)};
      results.push_back(device.wait(device.launch(copy, args)));
    }
    CHECK_FALSE(results[0].memo_hit);
    CHECK(results[1].memo_hit);       // same program, same launch
    CHECK_FALSE(results[2].memo_hit);  // another scalar argument
    CHECK(results[1].cycles == results[0].cycles);
    CHECK(results[2].cycles < results[0].cycles);
    CHECK(results[0].summary.hbm_read_bytes == 512 * 64);
    std::vector<uint8_t> back(512 * 64, 7);
    device.copy_to_host(back, src);  // placeholders: timing-only HBM holds no values
    CHECK(back == std::vector<uint8_t>(512 * 64, 0));
    device.set_timing_only(false);
    device.copy_to_host(back, dst);
    CHECK(back == std::vector<uint8_t>(512 * 64, 0));  // the DMAs moved nothing
  }

  TEST_CASE("programs whose timing may depend on data are found, and timing-only runs of them are flagged, never memoised") {
    const auto chip = sim::load_chip("v5e");
    const auto depends = [&](const char* text) { return sim::prepare(isa::assemble(text), chip).flow.depends_on_data; };
    CHECK(depends("  sli s1, 0\n  sld s2, s1, 0\n  halt\n"));  // a scalar read of VMEM data
    // A load or store under a mask compared from loaded data (directly, or through mnot).
    const char* loaded = "  sli s1, 0\n  vld v0, m0, s1, 0, 512\n";
    CHECK(depends(fmt::format("{}  vcmp.lt m1, v0, v1\n  vld v2, m1, s1, 0, 512\n  halt\n", loaded).c_str()));
    CHECK(depends(fmt::format("{}  vcmp.lt m1, v1, v0\n  mnot m2, m1\n  vst v2, m2, s1, 0, 512\n  halt\n", loaded).c_str()));
    // Masks from counts, or compared from lane indices and scalars (a row kernel's lane-0 mask), are
    // exact in a timing-only run; a data mask that only selects values does not move timing.
    CHECK_FALSE(depends("  sli s1, 300\n  vmaskn m1, s1\n  sli s2, 0\n  vld v2, m1, s2, 0, 512\n  halt\n"));
    CHECK_FALSE(depends("  viota v1\n  sli s1, 1\n  vbcast v2, s1\n  vicmp.lt m1, v1, v2\n  sli s2, 0\n"
                        "  vst v1, m1, s2, 0, 512\n  halt\n"));
    CHECK_FALSE(depends(fmt::format("{}  vcmp.lt m1, v0, v1\n  vsel v2, m1, v0, v1\n  vst v2, m0, s1, 0, 512\n  halt\n", loaded).c_str()));
    // A timing-only run computes that mask (the vicmp.lt), and skips arithmetic on loaded data.
    const auto lane0 = sim::prepare(isa::assemble("  viota v1\n  sli s1, 1\n  vbcast v2, s1\n  vicmp.lt m1, v1, v2\n"
                                                  "  sli s2, 0\n  vld v3, m0, s2, 0, 512\n  vadd v4, v3, v1\n  halt\n"),
                                    chip);
    CHECK(lane0.flow.computes_untainted == std::vector<uint8_t>{1, 0, 1, 1, 0, 0, 0, 0});

    sim::SimDevice device(chip);
    device.set_timing_only(true);
    const isa::Program reads = isa::assemble("  sli s1, 0\n  sld s2, s1, 0\n  halt\n");
    for (int i = 0; i < 2; ++i) {
      const auto r = device.wait(device.launch(reads, {}));
      CHECK(r.depends_on_data);
      CHECK_FALSE(r.memo_hit);
    }
  }
}
