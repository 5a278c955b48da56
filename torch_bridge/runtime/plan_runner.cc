#include "torch_bridge/runtime/plan_runner.h"

#include <fmt/format.h>

#include <stdexcept>

namespace vtpu::bridge {

PlanExecution::PlanExecution(sim::Device& device, const kernels::Plan& plan, const std::map<int, sim::HbmAddress>& bound)
    : device_(device), plan_(plan), inputs_(bound) {
  for (const auto& values : {plan.inputs, plan.outputs}) {
    for (int v : values) {
      if (plan.value_bytes.count(v) && !inputs_.count(v)) throw std::invalid_argument(fmt::format("plan value {} is not bound", v));
    }
  }
  if (plan.memory.arena_bytes > 0) {
    arena_ = device.allocate(plan.memory.arena_bytes);
    has_arena_ = true;
  }
  run_.arena_bytes = plan.memory.arena_bytes;
  for (const auto& launch : plan.launches) {
    std::vector<sim::KernelArg> args;
    for (int v : launch.args) args.push_back(sim::KernelArg::buffer(address(v), bytes(v)));
    const sim::LaunchResult r = device.wait(device.launch(*launch.program, args));
    run_.cycles += r.cycles;
    run_.seconds += r.summary.seconds();
    run_.hbm_read_bytes += r.summary.hbm_read_bytes;
    run_.hbm_write_bytes += r.summary.hbm_write_bytes;
    ++run_.launches;
  }
}

PlanExecution::~PlanExecution() {
  if (has_arena_) device_.free(arena_);
}

sim::HbmAddress PlanExecution::address(int value) const {
  if (auto a = plan_.alias.find(value); a != plan_.alias.end()) return address(a->second);
  if (auto it = inputs_.find(value); it != inputs_.end()) return it->second;
  auto it = plan_.memory.offset.find(value);
  if (it == plan_.memory.offset.end()) throw std::out_of_range(fmt::format("value {} is not materialised by this plan", value));
  return arena_ + it->second;
}

}  // namespace vtpu::bridge
