// One kernel launch of a plan: the program (shared through the program cache), the graph value
// bound to each buffer argument, and the launch's scalar arguments.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "isa/program.h"
#include "kernels/graph/shared_cache.h"

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

}  // namespace vtpu::kernels
