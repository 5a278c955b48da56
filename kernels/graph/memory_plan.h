// The memory plan: the lifetime of every intermediate a plan materialises (the launch that first
// touches it, the last that reads it), when each graph input is read for the last time, and the
// peak those lifetimes need, found by placing the intermediates first-fit in one arena. The plan
// runner allocates and frees by these lifetimes (held VMEM first, else HBM), so what runs is what
// was planned; the arena offsets are only the placement that shows the peak is reachable (no
// allocator hands out one arena: held VMEM and HBM are separate memories).
// Graph inputs stay in the caller's buffers, graph outputs in buffers the caller binds.
// Intermediates that fusion kept inside one kernel never appear here.
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
  std::map<int, ValueLifetime> intermediates;  // by value
  std::map<int, uint64_t> offset;              // value -> its place in the first-fit arena
  std::map<int, int> input_last_step;          // graph input -> the last launch that reads it
  uint64_t arena_bytes = 0;        // peak: the first-fit arena's size
  uint64_t total_bytes = 0;        // what the values would need without reuse
};

inline constexpr uint64_t kArenaAlignment = 512;

// The intermediates' lifetimes and their peak: first-fit over an arena in launch order, a freed
// range reused from the next launch on. input_last_step is left to the caller.
MemoryPlan plan_memory(std::vector<ValueLifetime> values);

}  // namespace vtpu::kernels
