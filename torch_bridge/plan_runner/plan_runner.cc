#include "torch_bridge/plan_runner/plan_runner.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "sim/sim_error.h"

namespace vtpu::bridge {

PlanExecution::PlanExecution(sim::Device& device, const kernels::Plan& plan, const std::map<int, sim::HbmAddress>& bound)
    : PlanExecution(device, plan, bound, nullptr) {}

PlanExecution::PlanExecution(sim::Device& device, const kernels::Plan& plan, const std::map<int, sim::HbmAddress>& bound,
                             std::function<sim::HbmAddress(int)> allocate_output, std::function<void(int)> input_done,
                             std::function<void(size_t)> after_launch)
    : device_(device), plan_(plan), inputs_(bound), allocate_output_(std::move(allocate_output)) {
  for (int v : plan.inputs) {
    if (plan.value_bytes.count(v) && !inputs_.count(v)) throw std::invalid_argument(fmt::format("plan input {} is not bound", v));
  }
  for (int v : plan.outputs) {
    if (plan.value_bytes.count(v) && !inputs_.count(v) && !allocate_output_) {
      throw std::invalid_argument(fmt::format("plan output {} is not bound", v));
    }
  }
  // A bound output that reshapes another value: the kernel writing that value writes the output.
  for (int v : plan.outputs) {
    const auto a = plan.alias.find(v);
    // (not a part of the value: the output's buffer holds only the part)
    if (a != plan.alias.end() && inputs_.count(v) && !inputs_.count(a->second) && !plan.alias_offset.count(v)) {
      inputs_[a->second] = inputs_.at(v);
    }
  }
  // Intermediates get memory (held VMEM, else HBM) at the first launch of their planned lifetime
  // and give it back after its last, so the device's peak follows the plan's liveness (the memory
  // plan's arena size is that peak, computed ahead of time; run().arena_bytes reports it).
  run_.arena_bytes = plan.memory.arena_bytes;
  const auto& lifetimes = plan.memory.intermediates;
  // A launch that fails (a trap, HBM exhausted) throws out of this constructor, so the destructor
  // never runs: the intermediates are given back here.
  try {
    for (size_t step = 0; step < plan.launches.size(); ++step) {
      const auto& launch = plan.launches[step];
      for (int v : launch.args) {
        const int root = plan.alias.count(v) ? plan.alias.at(v) : v;
        if (lifetimes.count(root) && !intermediates_.count(root) && !inputs_.count(root)) {
          // VMEM held across launches first: an intermediate that fits never goes to HBM, and the
          // kernels reading it skip the HBM round trip. Only when it is full does HBM take it.
          const uint64_t b = std::max<uint64_t>(plan.value_bytes.at(root), 1);
          if (const auto held = device.allocate_held(b)) {
            intermediates_[root] = *held;
            ++run_.held_intermediates;
          } else {
            intermediates_[root] = device.allocate(b);
            ++run_.hbm_intermediates;
          }
        }
      }
      // A launch over more than one address window holds runs piece by piece (Launch::pieces).
      const std::vector<kernels::LaunchPiece> whole{{{}, launch.scalars}};
      for (const kernels::LaunchPiece& piece : launch.pieces.empty() ? whole : launch.pieces) {
        std::vector<sim::KernelArg> args;
        for (size_t i = 0; i < launch.args.size(); ++i) {
          const int v = launch.args[i];
          const auto range = piece.ranges.empty() ? kernels::LaunchPiece::Range{0, bytes(v)} : piece.ranges[i];
          args.push_back(sim::KernelArg::buffer(address(v) + range.offset, range.bytes));
        }
        for (int32_t scalar : piece.scalars) args.push_back(sim::KernelArg::value(scalar));
        try {
          const auto started = std::chrono::steady_clock::now();
          const sim::LaunchResult result = device.wait(device.launch(*launch.program, args));
          run_.add(launch.label, result, std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
        } catch (const sim::SimError& e) {
          if (e.kind() == sim::SimErrorKind::OutOfMemory) throw;  // keeps its sizes
          // Which kernel of the flush failed: its label (the fused ops, or a user kernel's name).
          throw LaunchFailure(e, fmt::format("kernel {}: {}", launch.label, e.what()), launch.program);
        }
      }
      if (input_done) {
        for (const auto& [v, last] : plan.memory.input_last_step) {
          if (last == static_cast<int>(step)) input_done(v);
        }
      }
      for (auto it = intermediates_.begin(); it != intermediates_.end();) {
        if (lifetimes.at(it->first).last_step == static_cast<int>(step)) {
          device.free(it->second);
          it = intermediates_.erase(it);
        } else {
          ++it;
        }
      }
      if (after_launch) after_launch(step + 1);
    }
  } catch (...) {
    for (const auto& [v, addr] : intermediates_) device.free(addr);
    intermediates_.clear();
    throw;
  }
}

void PlanRun::add(const std::string& label, const sim::LaunchResult& r, double host_seconds) {
  cycles += r.cycles;
  seconds += r.summary.seconds();
  hbm_read_bytes += r.summary.hbm_read_bytes;
  hbm_write_bytes += r.summary.hbm_write_bytes;
  held_vmem_bytes += r.summary.held_vmem_bytes;
  ++launches;
  per_kernel[label] += {1, r.cycles, r.summary.seconds(), r.summary.flops, r.summary.hbm_read_bytes, r.summary.hbm_write_bytes,
                        host_seconds};
  timeline.push_back({label, r.summary.seconds()});
  for (size_t i = 0; i < r.summary.units.size(); ++i) {
    const auto& unit = r.summary.units[i];
    // The i-th unit is where the previous launch put it, unless this launch ran other cores.
    auto at = busy_cycles_per_unit.begin() + static_cast<std::ptrdiff_t>(std::min(i, busy_cycles_per_unit.size()));
    if (at == busy_cycles_per_unit.end() || at->first != unit.name) {
      at = std::find_if(busy_cycles_per_unit.begin(), busy_cycles_per_unit.end(),
                        [&](const auto& entry) { return entry.first == unit.name; });
      if (at == busy_cycles_per_unit.end()) at = busy_cycles_per_unit.insert(at, {unit.name, 0});
    }
    at->second += unit.busy_cycles;
  }
  memo_hits += r.memo_hit;
  if (r.depends_on_data) ++data_dependent[label];
}

KernelProfile& KernelProfile::operator+=(const KernelProfile& other) {
  launches += other.launches;
  cycles += other.cycles;
  seconds += other.seconds;
  flops += other.flops;
  hbm_read_bytes += other.hbm_read_bytes;
  hbm_write_bytes += other.hbm_write_bytes;
  host_seconds += other.host_seconds;
  return *this;
}

PlanExecution::~PlanExecution() {
  for (const auto& [v, addr] : intermediates_) device_.free(addr);
}

sim::HbmAddress PlanExecution::address(int value) {
  if (auto a = plan_.alias.find(value); a != plan_.alias.end()) {
    const auto offset = plan_.alias_offset.find(value);
    return address(a->second) + (offset == plan_.alias_offset.end() ? 0 : offset->second);
  }
  if (auto it = inputs_.find(value); it != inputs_.end()) return it->second;
  if (allocate_output_ && std::find(plan_.outputs.begin(), plan_.outputs.end(), value) != plan_.outputs.end()) {
    return inputs_[value] = allocate_output_(value);
  }
  auto it = intermediates_.find(value);
  if (it == intermediates_.end()) throw std::out_of_range(fmt::format("value {} is not materialised at this point of the plan", value));
  return it->second;
}

}  // namespace vtpu::bridge
