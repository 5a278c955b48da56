// From a graph to what runs: fusion groups lowered to programs (through the program cache),
// the launch list with each argument's value, and the memory plan. A Plan is a pure description;
// torch_bridge's runtime executes it on a sim::Device.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kernels/graph/fusion.h"
#include "kernels/graph/graph.h"
#include "kernels/graph/launch.h"
#include "kernels/graph/memory_plan.h"
#include "sim/chip_config.h"

namespace vtpu::kernels {

struct Plan {
  std::vector<Launch> launches;
  MemoryPlan memory;                       // lifetimes of the materialised intermediates, and their peak
  std::map<int, uint64_t> value_bytes;     // bytes of every value a launch touches
  std::vector<int> inputs, outputs;
  std::map<int, int> alias;                // reshape value -> the value whose buffer it reads
  std::map<int, uint64_t> alias_offset;    // a part of it (Graph::part) -> the byte it starts at
  FusionStrategy strategy = FusionStrategy::Greedy;
};

Plan make_plan(const Graph& graph, FusionStrategy strategy, const sim::ChipConfig& chip, ProgramCache& cache);

// A stable text signature of a graph's structure (ops, attributes, shapes, dtypes), for caching
// whole plans.
std::string graph_signature(const Graph& graph);

}  // namespace vtpu::kernels
