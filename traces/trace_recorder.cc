#include "traces/trace_recorder.h"

namespace vtpu::traces {

int TraceRecorder::add_track(const std::string& name, const std::string& process) {
  const auto [it, added] = track_ids_.try_emplace({name, prefix_ + process}, static_cast<int>(tracks_.size()));
  if (added) {
    tracks_.push_back({name, prefix_ + process});
    open_.emplace_back();
  }
  return it->second;
}

int TraceRecorder::add_counter(const std::string& name, const std::string& process) {
  const auto [it, added] = counter_ids_.try_emplace({name, prefix_ + process}, static_cast<int>(counters_.size()));
  if (added) counters_.push_back({name, prefix_ + process});
  return it->second;
}

void TraceRecorder::slice(int track, uint64_t start_cycle, uint64_t end_cycle, const char* name) {
  start_cycle += offset_;
  end_cycle += offset_;
  Open& open = open_[track];
  if (open.active && open.slice.name == name && start_cycle <= open.slice.end_cycle + merge_gap_) {
    open.slice.end_cycle = std::max(open.slice.end_cycle, end_cycle);
    ++open.slice.instructions;
    return;
  }
  if (open.active) {
    if (slices_.size() < max_slices_) slices_.push_back(open.slice);
    else truncated_ = true;
  }
  // A unit's slices never overlap: a new one starts no earlier than the last one ended.
  const uint64_t start = open.active ? std::max(start_cycle, open.slice.end_cycle) : start_cycle;
  open.active = true;
  open.slice = {track, start, std::max(start, end_cycle), name, 1};
}

void TraceRecorder::interval(int track, uint64_t start_cycle, uint64_t end_cycle, const std::string& name) {
  if (slices_.size() < max_slices_) slices_.push_back({track, start_cycle, std::max(start_cycle, end_cycle), name, 0});
  else truncated_ = true;
}

void TraceRecorder::span(int track, uint64_t start_cycle, uint64_t end_cycle, const std::string& name) {
  interval(track, start_cycle + offset_, end_cycle + offset_, name);
}

void TraceRecorder::sample(int counter, uint64_t cycle, double value) {
  if (samples_.size() < max_slices_) samples_.push_back({counter, cycle + offset_, value});
  else truncated_ = true;
}

void TraceRecorder::flush() {
  for (Open& open : open_) {
    if (!open.active) continue;
    if (slices_.size() < max_slices_) slices_.push_back(open.slice);
    else truncated_ = true;
    open.active = false;
  }
}

}  // namespace vtpu::traces
