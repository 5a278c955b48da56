#include "torch_bridge/csrc/runtime/collective_timing.h"

#include <cmath>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>

#include "kernels/generators/collectives.h"
#include "sim/device.h"
#include "sim/interconnect.h"

namespace vtpu::bridge {
namespace {

constexpr int64_t kTileBytesPerChip = 8192;  // the reduce kernels' chunk multiple

CollectiveTiming run(CollectiveKind kind, const std::vector<int>& axes, const sim::ChipConfig& chip, int64_t bytes,
                     int src, int dst) {
  auto slice = sim::make_sim_slice(chip, axes);
  const int chips = slice->chips();
  const sim::Slice topology(chip, axes);
  const kernels::SliceShape shape{topology.axes(), topology.wraps()};
  const bool reduces = kind == CollectiveKind::ReduceScatter || kind == CollectiveKind::AllReduce;
  const bool chunked = kind != CollectiveKind::Broadcast && kind != CollectiveKind::Send;
  const int64_t multiple = reduces ? kTileBytesPerChip * chips : chunked ? chips : 1;
  const int64_t total = std::max<int64_t>(multiple, (bytes + multiple - 1) / multiple * multiple);
  isa::Program program;
  int buffers = 1;
  switch (kind) {
    case CollectiveKind::AllGather: program = kernels::make_all_gather(shape, chip); break;
    case CollectiveKind::ReduceScatter: program = kernels::make_reduce_scatter(shape, chip), buffers = 3; break;
    case CollectiveKind::AllReduce: program = kernels::make_all_reduce(shape, chip), buffers = 3; break;
    case CollectiveKind::AllToAll: program = kernels::make_all_to_all(shape, chip), buffers = 2; break;
    case CollectiveKind::Broadcast: program = kernels::make_broadcast(shape, chip); break;
    case CollectiveKind::Send: program = kernels::make_send(shape, chip); break;
    case CollectiveKind::Scatter: program = kernels::make_scatter(shape, chip); break;
    case CollectiveKind::Gather: program = kernels::make_gather(shape, chip); break;
  }
  std::vector<std::vector<sim::KernelArg>> args(chips);
  for (int c = 0; c < chips; ++c) {
    for (int b = 0; b < buffers; ++b) {  // the data (and output, or the reductions' two inboxes)
      args[c].push_back(sim::KernelArg::buffer(slice->allocate(c, uint64_t(total)), uint64_t(total)));
    }
    args[c].push_back(sim::KernelArg::value(int32_t(chunked ? total / chips : total)));
    if (kind == CollectiveKind::Send) {
      args[c].push_back(sim::KernelArg::value(int32_t(src)));
      args[c].push_back(sim::KernelArg::value(int32_t(dst)));
    } else if (kind == CollectiveKind::Scatter || kind == CollectiveKind::Gather) {
      args[c].push_back(sim::KernelArg::value(int32_t(kind == CollectiveKind::Scatter ? src : dst)));  // the root
    }
  }
  const auto result = slice->launch(program, args);
  CollectiveTiming timing{double(result.cycles) / chip.clock_hz, {}};
  for (const auto& link : result.links) {
    CollectiveTiming::Link drawn{link.name, link.from, {}};
    for (const auto& [start, end] : link.busy) drawn.busy.emplace_back(start / chip.clock_hz, end / chip.clock_hz);
    timing.links.push_back(std::move(drawn));
  }
  return timing;
}

// The timing stretched to `seconds` (a size past the largest run).
CollectiveTiming stretched(CollectiveTiming timing, double seconds) {
  const double factor = timing.seconds > 0 ? seconds / timing.seconds : 1;
  for (auto& link : timing.links) {
    for (auto& [start, end] : link.busy) start *= factor, end *= factor;
  }
  timing.seconds = seconds;
  return timing;
}

}  // namespace

CollectiveTiming simulated_collective(CollectiveKind kind, const std::vector<int>& axes, const sim::ChipConfig& chip,
                                      double bytes, int src, int dst) {
  int chips = 1;
  for (int n : axes) chips *= n;
  if (chips <= 1 || bytes <= 0) return {};
  // a chip the kind does not use is no part of its cache key
  if (kind != CollectiveKind::Send && kind != CollectiveKind::Scatter) src = 0;
  if (kind != CollectiveKind::Send && kind != CollectiveKind::Gather) dst = 0;
  for (int chip_index : {src, dst}) {
    if (chip_index < 0 || chip_index >= chips) {
      throw std::invalid_argument("vtpu: chip " + std::to_string(chip_index) + " is not in a slice of " +
                                  std::to_string(chips) + " chips");
    }
  }
  if (kind == CollectiveKind::Send && src == dst) return {};  // nothing crosses a link
  static std::mutex mutex;
  static std::map<std::tuple<int, std::vector<int>, std::string, int64_t, int, int>, CollectiveTiming> cache;
  const auto timed = [&](int64_t size) {
    const std::lock_guard lock(mutex);
    const auto key = std::make_tuple(int(kind), axes, chip.name, size, src, dst);
    auto it = cache.find(key);
    if (it == cache.end()) it = cache.emplace(key, run(kind, axes, chip, size, src, dst)).first;
    return it->second;
  };
  if (bytes <= kMaxTimedBytes) return timed(static_cast<int64_t>(std::ceil(bytes)));
  const CollectiveTiming at_max = timed(int64_t(kMaxTimedBytes));
  const double at_half = timed(int64_t(kMaxTimedBytes / 2)).seconds;
  return stretched(at_max, at_max.seconds + (bytes - kMaxTimedBytes) * (at_max.seconds - at_half) / (kMaxTimedBytes / 2));
}

}  // namespace vtpu::bridge
