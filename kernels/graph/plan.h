// From a graph to what runs: fusion groups lowered to programs (through the program cache),
// the launch list with each argument's value, and the memory plan. A Plan is a pure description;
// torch_bridge's runtime executes it on a sim::Device.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "isa/program.h"
#include "kernels/graph/fusion.h"
#include "kernels/graph/graph.h"
#include "kernels/graph/memory_plan.h"
#include "kernels/graph/shared_cache.h"
#include "sim/chip_config.h"

namespace vtpu::kernels {

// Programs keyed by a stable signature of the kernel spec and chip. Thread-safe.
using ProgramCache = SharedCache<isa::Program>;

struct Launch {
  std::shared_ptr<const isa::Program> program;
  std::vector<int> args;  // the value bound to each buffer argument
  std::vector<int32_t> scalars;  // the scalar arguments that follow the buffers (a row count)
  std::string label;      // the fused nodes, e.g. "matmul+add+gelu"
  bool cache_hit = false;
};

struct Plan {
  std::vector<Launch> launches;
  MemoryPlan memory;                       // arena offsets of the materialised intermediates
  std::map<int, uint64_t> value_bytes;     // bytes of every value a launch touches
  std::vector<int> inputs, outputs;
  std::map<int, int> alias;                // reshape value -> the value whose buffer it reads
  FusionStrategy strategy = FusionStrategy::Greedy;
};

Plan make_plan(const Graph& graph, FusionStrategy strategy, const sim::ChipConfig& chip, ProgramCache& cache);

// A stable text signature of a graph's structure (ops, attributes, shapes, dtypes), for caching
// whole plans.
std::string graph_signature(const Graph& graph);

}  // namespace vtpu::kernels
