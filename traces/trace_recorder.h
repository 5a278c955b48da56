// Collects what a simulated run did, in cycles: one track per unit, slices that merge back-to-back
// instructions of the same kind (so a 10^5-instruction kernel stays a readable timeline), and
// counter samples (HBM bandwidth, occupancy). Written out by trace_writer.h.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace vtpu::traces {

struct Slice {
  int track;
  uint64_t start_cycle;
  uint64_t end_cycle;
  std::string name;
  uint32_t instructions;  // how many instructions were merged into this slice
};

struct CounterSample {
  int counter;
  uint64_t cycle;
  double value;
};

struct TrackInfo {
  std::string name;
  std::string process;  // Perfetto groups tracks by process: "chip0/core0", ...
};

class TraceRecorder {
 public:
  // Slices of the same name on one track merge when the gap between them is at most this.
  explicit TraceRecorder(uint64_t merge_gap_cycles = 32, size_t max_slices = 500000)
      : merge_gap_(merge_gap_cycles), max_slices_(max_slices) {}

  // A track (counter) is one unit's row: asking again for the same name in the same process (the
  // prefix included) returns the same one, so every launch of a device draws on the same rows.
  int add_track(const std::string& name, const std::string& process);
  int add_counter(const std::string& name, const std::string& process);
  void slice(int track, uint64_t start_cycle, uint64_t end_cycle, const char* name);
  // A slice at absolute cycles (no offset, no merging): work timed outside the simulator, such as
  // a collective on the interconnect's closed-form timeline.
  void interval(int track, uint64_t start_cycle, uint64_t end_cycle, const std::string& name);
  // A slice of this launch's cycles (offset like slice()) that never merges with its neighbours:
  // a span with its own name, such as a kernel's grid step (isa `mark`).
  void span(int track, uint64_t start_cycle, uint64_t end_cycle, const std::string& name);
  // Prefixed to the process of tracks added from now on ("tpu:1 " names the chip of a slice).
  void set_process_prefix(std::string prefix) { prefix_ = std::move(prefix); }
  void sample(int counter, uint64_t cycle, double value);
  // Shift all later events by `cycles` (a second launch on the same device follows the first).
  void set_time_offset(uint64_t cycles) { offset_ = cycles; }
  void flush();

  const std::vector<TrackInfo>& tracks() const { return tracks_; }
  const std::vector<TrackInfo>& counters() const { return counters_; }
  const std::vector<Slice>& slices() const { return slices_; }
  const std::vector<CounterSample>& samples() const { return samples_; }
  bool truncated() const { return truncated_; }

 private:
  struct Open {
    bool active = false;
    Slice slice;
  };
  uint64_t merge_gap_;
  size_t max_slices_;
  uint64_t offset_ = 0;
  std::string prefix_;
  std::map<std::pair<std::string, std::string>, int> track_ids_, counter_ids_;
  bool truncated_ = false;
  std::vector<TrackInfo> tracks_;
  std::vector<TrackInfo> counters_;
  std::vector<Open> open_;
  std::vector<Slice> slices_;
  std::vector<CounterSample> samples_;
};

}  // namespace vtpu::traces
