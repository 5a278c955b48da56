// Executes a kernels::Plan on any sim::Device (the retargeting seam): one HBM arena for the
// values the plan materialises, launches in order, counters summed. The bridge's modes and the
// benchmarks both run plans through this.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "kernels/plan.h"
#include "sim/device.h"

namespace vtpu::bridge {

struct PlanRun {
  uint64_t cycles = 0;           // simulated, launches back to back
  double seconds = 0;
  uint64_t hbm_read_bytes = 0;
  uint64_t hbm_write_bytes = 0;
  uint64_t arena_bytes = 0;      // HBM the plan's intermediates took
  uint64_t peak_hbm_bytes = 0;   // filled by callers that know the device's peak
  size_t launches = 0;
};

// Owns the arena of one plan execution; outputs stay readable until it is destroyed.
class PlanExecution {
 public:
  // `bound` gives a device buffer, owned by the caller, for every graph input and output; the
  // plan's intermediates go to an arena owned by this object.
  PlanExecution(sim::Device& device, const kernels::Plan& plan, const std::map<int, sim::HbmAddress>& bound);
  ~PlanExecution();
  PlanExecution(const PlanExecution&) = delete;
  PlanExecution& operator=(const PlanExecution&) = delete;

  const PlanRun& run() const { return run_; }
  sim::HbmAddress address(int value) const;  // a bound value's or an intermediate's buffer
  uint64_t bytes(int value) const { return plan_.value_bytes.at(value); }

 private:
  sim::Device& device_;
  const kernels::Plan& plan_;
  std::map<int, sim::HbmAddress> inputs_;
  sim::HbmAddress arena_ = 0;
  bool has_arena_ = false;
  PlanRun run_;
};

}  // namespace vtpu::bridge
