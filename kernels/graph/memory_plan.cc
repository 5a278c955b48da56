// See memory_plan.h.
#include "kernels/graph/memory_plan.h"

#include <algorithm>
#include <climits>

namespace vtpu::kernels {

MemoryPlan plan_memory(std::vector<ValueLifetime> values) {
  MemoryPlan plan;
  std::stable_sort(values.begin(), values.end(), [](const auto& a, const auto& b) { return a.first_step < b.first_step; });
  struct Live {
    uint64_t offset, bytes;
    int last_step;
  };
  std::vector<Live> live;  // sorted by offset
  for (const auto& v : values) {
    const uint64_t bytes = (std::max<uint64_t>(v.bytes, 1) + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
    plan.total_bytes += bytes;
    // Values whose last reader ran before this launch give their space back. A value read by
    // this very launch stays: its kernel reads it while writing this one.
    std::erase_if(live, [&](const Live& l) { return l.last_step < v.first_step; });
    uint64_t at = 0;
    for (const auto& l : live) {
      if (l.offset >= at + bytes) break;
      at = std::max(at, l.offset + l.bytes);
    }
    live.push_back({at, bytes, v.last_step});
    std::sort(live.begin(), live.end(), [](const Live& a, const Live& b) { return a.offset < b.offset; });
    plan.intermediates[v.value] = v;
    plan.offset[v.value] = at;
    plan.arena_bytes = std::max(plan.arena_bytes, at + bytes);
  }
  return plan;
}

}  // namespace vtpu::kernels
