// Whole plans keyed by graph signature, strategy and chip: a graph seen before (the same step of a
// training loop, the same compiled region) skips fusion, memory planning and kernel lookup. Plans
// bind values by id, never addresses, so one plan serves every call. Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "kernels/plan.h"

namespace vtpu::kernels {

class PlanCache {
 public:
  explicit PlanCache(size_t capacity = 4096) : capacity_(capacity) {}
  std::shared_ptr<const Plan> get_or_make(const Graph& graph, FusionStrategy strategy, const sim::ChipConfig& chip,
                                          ProgramCache& programs, bool* hit = nullptr);
  uint64_t hits() const;
  uint64_t misses() const;
  size_t size() const;
  void clear();

 private:
  size_t capacity_;  // a workload with ever-new shapes must not grow the cache without bound
  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<const Plan>> plans_;
  uint64_t hits_ = 0, misses_ = 0;
};

}  // namespace vtpu::kernels
