#include "kernels/plan_cache.h"

#include <fmt/format.h>

namespace vtpu::kernels {

std::shared_ptr<const Plan> PlanCache::get_or_make(const Graph& graph, FusionStrategy strategy,
                                                   const sim::ChipConfig& chip, ProgramCache& programs, bool* hit) {
  const std::string key = fmt::format("{}|{}|{}", chip.name, fusion_strategy_name(strategy), graph_signature(graph));
  {
    std::lock_guard lock(mutex_);
    if (auto it = plans_.find(key); it != plans_.end()) {
      ++hits_;
      if (hit) *hit = true;
      return it->second;
    }
  }
  auto plan = std::make_shared<const Plan>(make_plan(graph, strategy, chip, programs));  // made outside the lock
  std::lock_guard lock(mutex_);
  ++misses_;
  if (hit) *hit = false;
  if (plans_.size() >= capacity_) plans_.clear();
  plans_.emplace(key, plan);
  return plan;
}

uint64_t PlanCache::hits() const {
  std::lock_guard lock(mutex_);
  return hits_;
}
uint64_t PlanCache::misses() const {
  std::lock_guard lock(mutex_);
  return misses_;
}
size_t PlanCache::size() const {
  std::lock_guard lock(mutex_);
  return plans_.size();
}
void PlanCache::clear() {
  std::lock_guard lock(mutex_);
  plans_.clear();
  hits_ = misses_ = 0;
}

}  // namespace vtpu::kernels
