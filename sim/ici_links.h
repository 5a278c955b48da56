// The ICI links of a slice as units with timelines: one per direction of each link between torus
// neighbours (a wrapped axis of more than two chips is a ring, otherwise a line, as sim::Slice
// decides). A transfer takes the dimension-order route (axis 0 first, the shorter way round a
// ring, half of the chips each way to the chip opposite) at the preset's one-way link bandwidth, pipelined link by link (cut-through: each link
// starts it a hop after the one before, in its first free interval), and lands a hop latency
// after the last link. Transfers sharing a link share its bandwidth: a link serves them as they
// come, filling any gap a transfer asked for earlier left before it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "sim/chip_config.h"
#include "sim/interconnect.h"
#include "traces/trace_recorder.h"

namespace vtpu::sim {

struct LinkUsage {
  std::string name;  // "chip 0 -> chip 1 (axis 0)"
  int from = 0;      // the chip it leaves
  uint64_t bytes = 0;
  uint64_t busy_cycles = 0;
  uint64_t transfers = 0;
  std::vector<std::pair<uint64_t, uint64_t>> busy;  // [start, end) cycles of each transfer, in order
};

class IciLinks {
 public:
  // `trace`: one track per link direction that carries data, in process "ICI".
  IciLinks(const ChipConfig& chip, const Slice& slice, traces::TraceRecorder* trace = nullptr);

  // Returns the cycle the last byte lands on `dst`; throws std::invalid_argument for src == dst or
  // a chip outside the slice.
  uint64_t transfer(int src, int dst, uint64_t bytes, uint64_t ready_cycle);
  // The links a transfer from src to dst crosses, in order.
  std::vector<int> route(int src, int dst) const;
  // Links that carried data, in link order.
  std::vector<LinkUsage> usage() const;
  double bytes_per_cycle() const { return bytes_per_cycle_; }
  uint64_t hop_latency_cycles() const { return hop_latency_cycles_; }

 private:
  struct Link {
    std::string name;
    int from = 0;
    // start -> end of each transfer it carries, in fractional cycles (back-to-back small transfers
    // must not round up each)
    std::map<double, double> busy_intervals;
    uint64_t bytes = 0, transfers = 0;
    double busy = 0;
    int trace_id = -1;
    // The earliest start at or after `at` of an interval of `duration` that is free.
    double earliest(double at, double duration) const;
  };
  int link_index(int chip, size_t axis, bool forward) const;

  const Slice& slice_;
  double bytes_per_cycle_;
  uint64_t hop_latency_cycles_;
  std::vector<Link> links_;  // chip x axis x {forward, backward}
  traces::TraceRecorder* trace_;
};

}  // namespace vtpu::sim
