#include "sim/ici_links.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <stdexcept>

namespace vtpu::sim {

IciLinks::IciLinks(const ChipConfig& chip, const Slice& slice, traces::TraceRecorder* trace)
    : slice_(slice),
      bytes_per_cycle_(chip.ici_link_bandwidth_bytes_per_s / chip.clock_hz),
      hop_latency_cycles_(static_cast<uint64_t>(std::llround(chip.ici_hop_latency_ns * 1e-9 * chip.clock_hz))),
      trace_(trace) {
  const auto& axes = slice.axes();
  links_.resize(size_t(slice.size()) * axes.size() * 2);
  for (int c = 0; c < slice.size(); ++c) {
    for (size_t a = 0; a < axes.size(); ++a) {
      for (bool forward : {true, false}) {
        auto coords = slice.coordinates(c);
        coords[a] = (coords[a] + (forward ? 1 : axes[a] - 1)) % axes[a];
        int to = 0;
        for (size_t i = 0; i < axes.size(); ++i) to = to * axes[i] + coords[i];
        Link& link = links_[link_index(c, a, forward)];
        link.name = fmt::format("chip {} -> chip {} (axis {})", c, to, a);
        link.from = c;
      }
    }
  }
}

int IciLinks::link_index(int chip, size_t axis, bool forward) const {
  return static_cast<int>((size_t(chip) * slice_.axes().size() + axis) * 2 + (forward ? 0 : 1));
}

std::vector<int> IciLinks::route(int src, int dst) const {
  if (src < 0 || dst < 0 || src >= slice_.size() || dst >= slice_.size() || src == dst) {
    throw std::invalid_argument(fmt::format("vtpu: no ICI route from chip {} to chip {} in a slice of {}", src, dst,
                                            slice_.size()));
  }
  const auto& axes = slice_.axes();
  auto at = slice_.coordinates(src);
  const auto to = slice_.coordinates(dst);
  std::vector<int> links;
  for (size_t a = 0; a < axes.size(); ++a) {
    const int n = axes[a];
    const bool ring = slice_.wraps()[a] && n > 2;
    const int ahead = ((to[a] - at[a]) % n + n) % n;  // steps forward round the ring
    // the way opposite is as short both ways: chips at even coordinates go forward, odd ones
    // back, so those transfers split evenly between the two directions
    const bool forward = ring ? (ahead < n - ahead || (ahead == n - ahead && at[a] % 2 == 0)) : to[a] > at[a];
    const int steps = ring ? (forward ? ahead : n - ahead) : std::abs(to[a] - at[a]);
    for (int s = 0; s < steps; ++s) {
      int chip = 0;
      for (size_t i = 0; i < axes.size(); ++i) chip = chip * axes[i] + at[i];
      links.push_back(link_index(chip, a, forward));
      at[a] = (at[a] + (forward ? 1 : n - 1)) % n;
    }
  }
  return links;
}

double IciLinks::Link::earliest(double at, double duration) const {
  // busy intervals are disjoint and sorted: walk the ones that end after `at`
  for (auto it = busy_intervals.upper_bound(at); ; ++it) {
    if (it != busy_intervals.begin()) {
      const auto before = std::prev(it);
      at = std::max(at, before->second);
    }
    if (it == busy_intervals.end() || at + duration <= it->first) return at;
  }
}

uint64_t IciLinks::transfer(int src, int dst, uint64_t bytes, uint64_t ready_cycle) {
  const std::vector<int> path = route(src, dst);
  const double duration = double(bytes) / bytes_per_cycle_;
  // Each link carries the transfer in its first free interval long enough, no sooner than a hop
  // after the link before started it: a multi-hop transfer is pipelined link by link (cut-through),
  // and a link idle before a transfer asked for earlier but starting later serves this one first.
  double start = double(ready_cycle) - double(hop_latency_cycles_);
  for (int l : path) {
    Link& link = links_[l];
    start = link.earliest(start + double(hop_latency_cycles_), duration);
    if (duration > 0) link.busy_intervals.emplace(start, start + duration);
    link.busy += duration;
    link.bytes += bytes;
    ++link.transfers;
    if (trace_) {
      if (link.trace_id < 0) link.trace_id = trace_->add_track(link.name, "ICI");
      trace_->interval(link.trace_id, static_cast<uint64_t>(start), static_cast<uint64_t>(std::ceil(start + duration)),
                       fmt::format("{} bytes, chip {} -> chip {}", bytes, src, dst));
    }
  }
  return static_cast<uint64_t>(std::ceil(start + duration)) + hop_latency_cycles_;
}

std::vector<LinkUsage> IciLinks::usage() const {
  std::vector<LinkUsage> out;
  for (const Link& l : links_) {
    if (l.transfers == 0) continue;
    LinkUsage u{l.name, l.from, l.bytes, static_cast<uint64_t>(std::llround(l.busy)), l.transfers, {}};
    for (const auto& [start, end] : l.busy_intervals) {
      u.busy.emplace_back(static_cast<uint64_t>(start), static_cast<uint64_t>(std::ceil(end)));
    }
    out.push_back(std::move(u));
  }
  return out;
}

}  // namespace vtpu::sim
