// The memory planner: places every value a plan materialises in one HBM arena, reusing the
// space of values whose last reader has run. Graph inputs stay in the caller's buffers; graph
// outputs live to the end. Intermediates that fusion kept in VMEM never appear here.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

namespace vtpu::kernels {

struct ValueLifetime {
  int value = -1;
  uint64_t bytes = 0;
  int first_step = 0;  // the launch that writes it
  int last_step = 0;   // the last launch that reads it (INT32_MAX: a graph output)
};

struct MemoryPlan {
  std::map<int, uint64_t> offset;  // value -> byte offset in the arena
  uint64_t arena_bytes = 0;        // peak: the arena's size
  uint64_t total_bytes = 0;        // what the values would need without reuse
};

inline constexpr uint64_t kArenaAlignment = 512;

// First-fit over the arena in launch order; a freed range is reused from the next launch on.
MemoryPlan plan_memory(std::vector<ValueLifetime> values);

}  // namespace vtpu::kernels
