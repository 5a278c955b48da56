#include "torch_bridge/plan_runner/plan_forecast.h"

#include <algorithm>
#include <set>

namespace vtpu::bridge {

HbmForecast forecast_hbm(const kernels::Plan& plan, const sim::Device& device, const std::map<int, sim::HbmAddress>& bound,
                         const ForecastCaller& caller) {
  const sim::MemoryStats now = device.memory_stats();
  const auto root_of = [&](int v) { return plan.alias.count(v) ? plan.alias.at(v) : v; };
  // Values with a buffer before the run: the bound ones, and (as the runner binds them) the
  // values that a bound output reshapes.
  std::set<int> has_buffer;
  for (const auto& [v, addr] : bound) has_buffer.insert(v);
  for (int v : plan.outputs) {
    if (bound.count(v) && !plan.alias_offset.count(v)) has_buffer.insert(root_of(v));  // (as the runner binds them)
  }
  const std::set<int> outputs(plan.outputs.begin(), plan.outputs.end());
  uint64_t hbm = now.allocated_bytes;
  uint64_t held_free = now.held_capacity_bytes - std::min(now.held_capacity_bytes, now.held_allocated_bytes);
  std::map<int, uint64_t> in_hbm, in_held;  // live intermediates -> bytes reserved
  HbmForecast f{hbm, -1};
  const auto& lifetimes = plan.memory.intermediates;
  for (size_t step = 0; step < plan.launches.size(); ++step) {
    for (int v : plan.launches[step].args) {
      const int root = root_of(v);
      if (lifetimes.count(root) && !in_hbm.count(root) && !in_held.count(root) && !has_buffer.count(root)) {
        const uint64_t b = device.allocation_bytes(std::max<uint64_t>(plan.value_bytes.at(root), 1));
        if (b <= held_free) {
          held_free -= b;
          in_held[root] = b;
        } else {
          hbm += b;
          in_hbm[root] = b;
        }
      }
      if (!has_buffer.count(root) && outputs.count(root)) {
        has_buffer.insert(root);
        if (const uint64_t b = caller.output_bytes ? caller.output_bytes(root) : 0) hbm += device.allocation_bytes(b);
      }
    }
    if (hbm > f.peak_bytes) f = {hbm, static_cast<int>(step)};
    if (const auto r = caller.released_after.find(static_cast<int>(step)); r != caller.released_after.end()) {
      hbm -= std::min(hbm, r->second);
    }
    // Intermediates read for the last time give their memory back after this launch.
    const auto free_dead = [&](std::map<int, uint64_t>& live, const std::function<void(uint64_t)>& give_back) {
      std::erase_if(live, [&](const auto& e) {
        if (lifetimes.at(e.first).last_step != static_cast<int>(step)) return false;
        give_back(e.second);
        return true;
      });
    };
    free_dead(in_hbm, [&](uint64_t b) { hbm -= b; });
    free_dead(in_held, [&](uint64_t b) { held_free += b; });
  }
  return f;
}

}  // namespace vtpu::bridge
