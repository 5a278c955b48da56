// Test helper: runs a planned graph on a fresh simulated v5e with f32 input data bound to input
// values (or on `chip`), and returns the graph's first output (f32) and, optionally, the run's counters;
// and the simulated seconds of a graph alone.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <vector>

#include "kernels/graph/plan.h"
#include "sim/sim_device.h"
#include "torch_bridge/plan_runner/plan_runner.h"

namespace vtpu::testing {

// run_graph moves f32 vectors: int32 data travels as their bit patterns, both ways.
inline std::vector<float> int32_bits_as_floats(const std::vector<int32_t>& v) {
  std::vector<float> f(v.size());
  if (!v.empty()) std::memcpy(f.data(), v.data(), v.size() * 4);  // memcpy's pointers may not be null, even for 0 bytes
  return f;
}
inline std::vector<int32_t> floats_as_int32_bits(const std::vector<float>& f) {
  std::vector<int32_t> v(f.size());
  if (!f.empty()) std::memcpy(v.data(), f.data(), f.size() * 4);
  return v;
}

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

// The int32 values of what `build` makes from int32 inputs [n] (one per vector in `inputs`), run
// greedily planned on v5e. A result that is one of the inputs itself (a shift by 0, a power of 1)
// is copied first: a graph output must be computed.
using Int32Inputs = std::vector<std::vector<int32_t>>;
inline std::vector<int32_t> run_int32_graph(const Int32Inputs& inputs,
                                            const std::function<int(kernels::Graph&, const std::vector<int>&)>& build) {
  kernels::Graph g;
  std::vector<int> values;
  std::vector<Bound> bound;
  for (const auto& data : inputs) {
    values.push_back(g.input({{int64_t(data.size())}, kernels::DType::I32}, "in"));
    bound.push_back({values.back(), int32_bits_as_floats(data)});
  }
  int out = build(g, values);
  if (std::find(values.begin(), values.end(), out) != values.end()) out = g.binary_scalar(kernels::ExprOp::Add, out, 0);
  g.mark_output(out);
  kernels::ProgramCache cache;
  const auto plan = kernels::make_plan(g, kernels::FusionStrategy::Greedy, sim::load_chip("v5e"), cache);
  return floats_as_int32_bits(run_graph(g, plan, bound));
}

// Simulated seconds of `g` planned greedily on `chip`, its inputs left as allocated (timing only).
inline double simulated_seconds(const kernels::Graph& g, const sim::ChipConfig& chip) {
  sim::SimDevice device(chip);
  kernels::ProgramCache cache;
  const auto plan = kernels::make_plan(g, kernels::FusionStrategy::Greedy, chip, cache);
  std::map<int, sim::HbmAddress> bound;
  for (const auto& values : {plan.inputs, plan.outputs}) {
    for (int v : values) {
      if (plan.value_bytes.count(v)) bound[v] = device.allocate(plan.value_bytes.at(v));
    }
  }
  bridge::PlanExecution exec(device, plan, bound);
  return exec.run().seconds;
}

}  // namespace vtpu::testing
