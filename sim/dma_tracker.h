// In-flight DMAs and semaphores of one core. A DMA's data is copied when it issues (functional
// model), but until a sem.wait consumes its signal the program may not touch what it reads or
// writes: such an access is a race the real chip would get wrong, so it is reported, not hidden.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

namespace vtpu::sim {

// A 2-D strided byte region: `rows` runs of `row_bytes`, `stride` apart. Overlap tests are exact,
// so DMAs into interleaved columns of one buffer (a tiled matrix) do not look like races.
struct Region {
  uint64_t base = 0, rows = 0, row_bytes = 0, stride = 0;
  static Region range(uint64_t lo, uint64_t hi) { return {lo, hi > lo ? 1u : 0u, hi - lo, 0}; }
  uint64_t lo() const { return base; }
  uint64_t hi() const { return rows == 0 ? base : base + (rows - 1) * stride + row_bytes; }
};
bool overlaps(const Region& a, const Region& b);

struct DmaRecord {
  size_t pc = 0;                 // issuing instruction
  bool to_vmem = true;           // h2v (true) or v2h
  Region vmem, hbm;              // hbm in kernel-visible (virtual) addresses
  int sem = 0;
  uint64_t start_cycle = 0;  // when its queue accepted it
  uint64_t done_cycle = 0;
  uint64_t sequence = 0;
};

class DmaTracker {
 public:
  explicit DmaTracker(int semaphores) : signals_(semaphores), consumed_(semaphores, 0), available_(semaphores, 0) {}

  // Each returns the in-flight DMA the access conflicts with (the earliest issued, if several),
  // or nullptr.
  const DmaRecord* vmem_read_conflict(const Region& r) const;   // with an inbound DMA
  const DmaRecord* vmem_write_conflict(const Region& r) const;  // with any DMA using it
  const DmaRecord* hbm_read_conflict(const Region& r) const;    // with an outbound DMA
  const DmaRecord* hbm_write_conflict(const Region& r) const;   // with any DMA using it
  // Another chip writing `r` from `start_cycle` on: a DMA of this chip's still using it then.
  // (This chip need not have waited for its DMA: the other chip cannot know, only the clock can.)
  const DmaRecord* remote_write_conflict(const Region& r, uint64_t start_cycle) const;

  void add(DmaRecord record);
  void signal(int sem, int count, uint64_t cycle);
  // Signals of `sem` sent so far and not consumed (landed or still in flight).
  int available(int sem) const { return available_[sem]; }
  // Consumes `count` signals of `sem`, earliest-landing first, and returns the cycle they had all
  // landed. The caller checks available() first: a wait for more would deadlock or block.
  uint64_t wait(int sem, int count);
  uint64_t last_completion_cycle() const { return last_completion_; }
  size_t in_flight() const { return in_flight_.size(); }

 private:
  struct Signal {
    uint64_t cycle;
    int count;
    uint64_t dma_sequence;  // 0 for sem.signal
  };
  // The in-flight DMAs' regions in one memory, by where each starts: an access need only look at
  // DMAs starting less than the longest region's span before it ends (a gather's thousands of row
  // DMAs waited on at once made every access scan all of them).
  struct RegionIndex {
    std::multimap<uint64_t, uint64_t> by_start;  // region lo -> DMA sequence
    uint64_t longest = 0;                        // the longest span indexed since it was last empty
    void add(const Region& r, uint64_t sequence);
    void remove(const Region& r, uint64_t sequence);
  };
  void queue_signal(int sem, const Signal& s);
  template <typename Accept>
  const DmaRecord* first_conflict(const RegionIndex& index, const Region& r, bool vmem, Accept accept) const;

  // Per semaphore, ordered by landing cycle; the first consumed_[sem] of them were consumed. (A
  // std::deque per semaphore cost two heap blocks each at every launch, used or not.)
  std::vector<std::vector<Signal>> signals_;
  std::vector<size_t> consumed_;
  std::vector<int> available_;               // per semaphore: signals sent and not consumed
  std::unordered_map<uint64_t, DmaRecord> in_flight_;  // by sequence
  RegionIndex vmem_index_, hbm_index_;
  uint64_t next_sequence_ = 1;
  uint64_t last_completion_ = 0;
};

}  // namespace vtpu::sim
