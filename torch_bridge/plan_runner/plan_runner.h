// Executes a kernels::Plan on any sim::Device (the retargeting seam): launches in order, memory for
// each materialised intermediate from its writer to its last reader (VMEM held across launches
// where the device has room, else HBM), counters summed. The bridge's modes and the
// benchmarks both run plans through this.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/graph/plan.h"
#include "sim/device.h"
#include "sim/sim_error.h"

namespace vtpu::bridge {

// Where a plan's cycles went, per kernel label ("matmul+add+gelu"), with what a roofline needs:
// the MXU's work as executed (padding included) and the HBM bytes the launches moved.
struct KernelProfile {
  uint64_t launches = 0;
  uint64_t cycles = 0;
  double seconds = 0;  // simulated
  double flops = 0;
  uint64_t hbm_read_bytes = 0;
  uint64_t hbm_write_bytes = 0;
  double host_seconds = 0;  // what simulating it took this host (which kernels make a run slow)

  KernelProfile& operator+=(const KernelProfile& other);
};

// One launch in the order it ran: what the profiler shows as a kernel on the chip's timeline.
struct LaunchSpan {
  std::string label;
  double seconds = 0;  // simulated
};

struct PlanRun {
  uint64_t cycles = 0;           // simulated, launches back to back
  double seconds = 0;
  uint64_t hbm_read_bytes = 0;
  uint64_t hbm_write_bytes = 0;
  uint64_t held_vmem_bytes = 0;  // moved to and from intermediates held in VMEM
  uint64_t arena_bytes = 0;      // the memory plan's peak for intermediates (held VMEM or HBM)
  uint64_t peak_hbm_bytes = 0;   // filled by callers that know the device's peak
  uint64_t peak_held_bytes = 0;  // the same for held VMEM
  size_t launches = 0;
  size_t held_intermediates = 0; // intermediates that lived in held VMEM
  size_t hbm_intermediates = 0;  // intermediates that did not fit there and took HBM
  std::map<std::string, KernelProfile> per_kernel;
  std::vector<LaunchSpan> timeline;  // every launch, in order
  // Per unit ("v5e core0 mxu0", ...), in the order the launches first reported them: launches
  // report their units in one order, so a flat list sums them without a map node per unit per
  // flush (an eager op's flush made twenty).
  std::vector<std::pair<std::string_view, uint64_t>> busy_cycles_per_unit;
  size_t memo_hits = 0;  // timing-only launches the timing memo answered
  // Launches of programs whose timing may depend on data (sim/data_dependence.h), by label.
  std::map<std::string, uint64_t> data_dependent;

  // Adds one launch of kernel `label` that gave `r`.
  void add(const std::string& label, const sim::LaunchResult& r, double host_seconds = 0);
};

// A launch of the plan failed on the chip: the error, prefixed with the launch's label, and the
// program that failed (a user kernel's front end maps its instruction back to the body's line).
class LaunchFailure : public sim::SimError {
 public:
  LaunchFailure(const sim::SimError& error, const std::string& message, std::shared_ptr<const isa::Program> program)
      : sim::SimError(error.kind(), message, error.trap_code()), program_(std::move(program)) {}
  const isa::Program* program() const { return program_.get(); }

 private:
  std::shared_ptr<const isa::Program> program_;
};

// Runs the plan in its constructor; intermediates are freed as they die.
class PlanExecution {
 public:
  // `bound` gives a device buffer, owned by the caller, for every graph input and output; the
  // plan's intermediates get HBM from the device while they live.
  PlanExecution(sim::Device& device, const kernels::Plan& plan, const std::map<int, sim::HbmAddress>& bound);
  // Outputs missing from `bound` are asked of `allocate_output` just before the launch that
  // writes them, so a long plan does not hold all its outputs' HBM from its first kernel on.
  // `input_done`, when given, hears of each graph input after the last launch that reads it, so
  // the caller can give back inputs nothing else holds while the rest of the plan runs.
  // `after_launch`, when given, hears how many of the plan's launches have run (progress bars).
  PlanExecution(sim::Device& device, const kernels::Plan& plan, const std::map<int, sim::HbmAddress>& bound,
                std::function<sim::HbmAddress(int value)> allocate_output,
                std::function<void(int value)> input_done = nullptr,
                std::function<void(size_t launched)> after_launch = nullptr);
  ~PlanExecution();
  PlanExecution(const PlanExecution&) = delete;
  PlanExecution& operator=(const PlanExecution&) = delete;

  const PlanRun& run() const { return run_; }
  PlanRun take_run() { return std::move(run_); }  // the run's totals, without copying its maps
  sim::HbmAddress address(int value);  // a bound value's or an intermediate's buffer
  uint64_t bytes(int value) const { return plan_.value_bytes.at(value); }

 private:
  sim::Device& device_;
  const kernels::Plan& plan_;
  std::map<int, sim::HbmAddress> inputs_;
  std::function<sim::HbmAddress(int)> allocate_output_;
  std::map<int, sim::HbmAddress> intermediates_;  // live ones only
  PlanRun run_;
};

}  // namespace vtpu::bridge
