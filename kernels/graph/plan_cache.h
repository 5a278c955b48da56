// Whole plans keyed by graph signature, strategy and chip: a graph seen before (the same step of a
// training loop, the same compiled region) skips fusion, memory planning and kernel lookup. Plans
// bind values by id, never addresses, so one plan serves every call. Thread-safe.
#pragma once

#include <memory>

#include "kernels/graph/plan.h"
#include "kernels/graph/shared_cache.h"

namespace vtpu::kernels {

class PlanCache : public SharedCache<Plan> {
 public:
  explicit PlanCache(size_t capacity = 4096) : SharedCache<Plan>(capacity) {}
  std::shared_ptr<const Plan> get_or_make(const Graph& graph, FusionStrategy strategy, const sim::ChipConfig& chip,
                                          ProgramCache& programs, bool* hit = nullptr);
};

}  // namespace vtpu::kernels
