// How long a collective takes on a slice, as the simulator runs it: the collective kernel
// (kernels/generators/collectives.h) launched on every chip of a simulated slice (sim::SliceDevice).
// The torch.distributed backend moves the data itself (over Gloo) and charges this time to the
// ranks' clocks. Timed once per kind, slice and size; sizes past kMaxTimedBytes are extrapolated.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "sim/chip_config.h"

namespace vtpu::bridge {

enum class CollectiveKind { AllGather, ReduceScatter, AllReduce, AllToAll, Broadcast, Send, Scatter, Gather };

// The largest array timed by running it (the slice holds it, and scratch for the reductions, on
// every chip); larger ones are bandwidth-bound, so their time is extended linearly from the time
// of kMaxTimedBytes and of half that.
inline constexpr double kMaxTimedBytes = 16.0 * (1 << 20);

// A collective's simulated time, and what each link carried when: per link that carried data,
// its transfers' [start, end) in seconds from the collective's start.
struct CollectiveTiming {
  struct Link {
    std::string name;  // "chip 0 -> chip 1 (axis 0)"
    int from = 0;      // the chip it leaves
    std::vector<std::pair<double, double>> busy;
  };
  double seconds = 0;
  std::vector<Link> links;
};

// The collective over `bytes` (each chip's whole array: all-gather's output, reduce-scatter's
// input, all-reduce's tensor, all-to-all's input in equal chunks, the tensor broadcast or sent, the
// scatter's input and the gather's output) on a slice of `axes` chips of `chip` (cached by its
// name). A send goes from chip `src` to chip `dst`; a scatter goes from root `src`, a gather to
// root `dst`; the other kinds ignore them. Reductions are timed as f32 sums over whole vreg tiles:
// `bytes` is rounded up to 8 KiB per chip. Past kMaxTimedBytes the links' activity is that of
// kMaxTimedBytes, stretched to the extended time.
CollectiveTiming simulated_collective(CollectiveKind kind, const std::vector<int>& axes, const sim::ChipConfig& chip,
                                      double bytes, int src = 0, int dst = 0);

}  // namespace vtpu::bridge
