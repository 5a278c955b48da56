#include "kernels/graph/plan_cache.h"

#include <fmt/format.h>

namespace vtpu::kernels {

std::shared_ptr<const Plan> PlanCache::get_or_make(const Graph& graph, FusionStrategy strategy,
                                                   const sim::ChipConfig& chip, ProgramCache& programs, bool* hit) {
  const std::string key = fmt::format("{}|{}|{}", chip.name, fusion_strategy_name(strategy), graph_signature(graph));
  return get_or_build(key, [&] { return make_plan(graph, strategy, chip, programs); }, hit);
}

}  // namespace vtpu::kernels
