// torch.profiler sees the chip. While a profile that asks for ProfilerActivity.PrivateUse1 (shown
// as ProfilerActivity.TPU) records, every kernel a flush launches is handed to Kineto as a tpu
// kernel lasting its simulated time, linked to the aten op that ran the flush; the profiler's
// table and exported trace then show chip time the way they show CUDA kernels.
#pragma once

#include <cstdint>
#include <vector>

#include "torch_bridge/plan_runner/plan_runner.h"

namespace vtpu::bridge::profiler {

// Whether a profile is recording chip kernels now (cheap; checked before every flush).
bool recording();
// Host time in Kineto's clock (ns since the epoch).
int64_t host_now_ns();
// The launches of one flush on `device`, which started at host time `host_start_ns` when the
// chip's simulated clock read `simulated_start_seconds`.
void note_launches(int device, int64_t host_start_ns, double simulated_start_seconds,
                   const std::vector<LaunchSpan>& launches);

}  // namespace vtpu::bridge::profiler
