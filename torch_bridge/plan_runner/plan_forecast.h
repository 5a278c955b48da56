// The least HBM a plan's run can need, known before any kernel runs: PlanExecution's allocations
// and frees (plan_runner.h) replayed as byte counts, each rounded as the device's allocator rounds it, held
// VMEM taken first while its free bytes last. Packing is taken as perfect in both memories, so a
// run may still fail on fragmentation; but a forecast above the capacity is a run that cannot
// succeed, which the bridge refuses whole before it starts (nothing half-run, the pending ops kept).
#pragma once

#include <cstdint>
#include <functional>
#include <map>

#include "kernels/graph/plan.h"
#include "sim/device.h"

namespace vtpu::bridge {

// What the caller of PlanExecution adds to the plan's own intermediates.
struct ForecastCaller {
  // HBM a graph output takes when the launch writing it runs (0: it already has its buffer).
  // Outputs in `bound` take none.
  std::function<uint64_t(int value)> output_bytes;
  // HBM the caller gives back after a launch (step -> bytes): inputs nothing else holds, freed
  // through PlanExecution's input_done.
  std::map<int, uint64_t> released_after;
};

struct HbmForecast {
  uint64_t peak_bytes = 0;  // HBM allocated at the run's peak: what the device holds now plus the run's
  int peak_step = -1;       // the launch at which it is reached (-1: before the first)
};

// From what `device` holds now.
HbmForecast forecast_hbm(const kernels::Plan& plan, const sim::Device& device, const std::map<int, sim::HbmAddress>& bound,
                         const ForecastCaller& caller);

}  // namespace vtpu::bridge
