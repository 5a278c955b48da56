// Test helper: runs a planned graph on a fresh simulated v5e with f32 input data bound to input
// values (or on `chip`), and returns the graph's first output (f32) and, optionally, the run's counters.
#pragma once

#include <map>
#include <vector>

#include "kernels/graph/plan.h"
#include "sim/sim_device.h"
#include "torch_bridge/plan_runner/plan_runner.h"

namespace vtpu::testing {

struct Bound {
  int value;
  std::vector<float> data;
};

inline std::vector<float> run_graph(const kernels::Graph& g, const kernels::Plan& plan, const std::vector<Bound>& inputs,
                                    bridge::PlanRun* run = nullptr, const sim::ChipConfig& chip = sim::load_chip("v5e")) {
  sim::SimDevice device(chip);
  std::map<int, sim::HbmAddress> bound;
  for (const auto& in : inputs) {
    const auto addr = device.allocate(in.data.size() * 4);
    device.copy_to_device(addr, {reinterpret_cast<const uint8_t*>(in.data.data()), in.data.size() * 4});
    bound[in.value] = addr;
  }
  const int out = g.outputs().at(0);
  std::vector<float> result(g.node(out).type.numel());
  bound[out] = device.allocate(result.size() * 4);
  bridge::PlanExecution exec(device, plan, bound);
  if (run) *run = exec.run();
  device.copy_to_host({reinterpret_cast<uint8_t*>(result.data()), result.size() * 4}, exec.address(out));
  return result;
}

}  // namespace vtpu::testing
