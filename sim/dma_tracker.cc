#include "sim/dma_tracker.h"

#include <algorithm>
#include <stdexcept>

namespace vtpu::sim {
namespace {

// Does row interval [lo, hi) meet any row of r?
bool meets_rows(uint64_t lo, uint64_t hi, const Region& r) {
  if (r.rows == 0 || hi <= r.lo() || lo >= r.hi()) return false;
  if (r.stride <= r.row_bytes || r.rows == 1) return true;  // rows touch or overlap: contiguous span
  // Row j covers [base + j*stride, base + j*stride + row_bytes). The first row that could reach lo:
  const uint64_t rel_lo = lo > r.base ? lo - r.base : 0;
  uint64_t j = rel_lo >= r.row_bytes ? (rel_lo - r.row_bytes) / r.stride + 1 : 0;
  if (j >= r.rows) return false;
  const uint64_t start = r.base + j * r.stride;
  return start < hi;
}

}  // namespace

bool overlaps(const Region& a, const Region& b) {
  if (a.rows == 0 || b.rows == 0 || a.hi() <= b.lo() || b.hi() <= a.lo()) return false;
  const Region& few = a.rows <= b.rows ? a : b;
  const Region& many = a.rows <= b.rows ? b : a;
  if (few.stride <= few.row_bytes || few.rows == 1) return meets_rows(few.lo(), few.hi(), many);
  for (uint64_t i = 0; i < few.rows; ++i) {
    const uint64_t lo = few.base + i * few.stride;
    if (meets_rows(lo, lo + few.row_bytes, many)) return true;
  }
  return false;
}

void DmaTracker::RegionIndex::add(const Region& r, uint64_t sequence) {
  by_start.emplace(r.lo(), sequence);
  longest = std::max(longest, r.hi() - r.lo());
}

void DmaTracker::RegionIndex::remove(const Region& r, uint64_t sequence) {
  auto [first, last] = by_start.equal_range(r.lo());
  for (auto it = first; it != last; ++it) {
    if (it->second == sequence) {
      by_start.erase(it);
      break;
    }
  }
  if (by_start.empty()) longest = 0;
}

template <typename Accept>
const DmaRecord* DmaTracker::first_conflict(const RegionIndex& index, const Region& r, bool vmem, Accept accept) const {
  if (r.rows == 0) return nullptr;
  const DmaRecord* found = nullptr;
  const uint64_t from = r.lo() > index.longest ? r.lo() - index.longest : 0;
  for (auto it = index.by_start.lower_bound(from); it != index.by_start.end() && it->first < r.hi(); ++it) {
    const DmaRecord& d = in_flight_.at(it->second);
    if ((!found || d.sequence < found->sequence) && accept(d) && overlaps(r, vmem ? d.vmem : d.hbm)) found = &d;
  }
  return found;
}

const DmaRecord* DmaTracker::vmem_read_conflict(const Region& r) const {
  return first_conflict(vmem_index_, r, true, [](const DmaRecord& d) { return d.to_vmem; });
}

const DmaRecord* DmaTracker::vmem_write_conflict(const Region& r) const {
  return first_conflict(vmem_index_, r, true, [](const DmaRecord&) { return true; });
}

const DmaRecord* DmaTracker::hbm_read_conflict(const Region& r) const {
  return first_conflict(hbm_index_, r, false, [](const DmaRecord& d) { return !d.to_vmem; });
}

const DmaRecord* DmaTracker::hbm_write_conflict(const Region& r) const {
  return first_conflict(hbm_index_, r, false, [](const DmaRecord&) { return true; });
}

const DmaRecord* DmaTracker::remote_write_conflict(const Region& r, uint64_t start_cycle) const {
  return first_conflict(hbm_index_, r, false, [start_cycle](const DmaRecord& d) { return d.done_cycle > start_cycle; });
}

void DmaTracker::add(DmaRecord record) {
  record.sequence = next_sequence_++;
  last_completion_ = std::max(last_completion_, record.done_cycle);
  queue_signal(record.sem, {record.done_cycle, 1, record.sequence});
  ++available_[record.sem];
  vmem_index_.add(record.vmem, record.sequence);
  hbm_index_.add(record.hbm, record.sequence);
  in_flight_.emplace(record.sequence, record);
}

// Keeps landing order; ties keep issue order.
void DmaTracker::queue_signal(int sem, const Signal& s) {
  auto& queue = signals_[sem];
  auto pos = std::upper_bound(queue.begin() + std::ptrdiff_t(consumed_[sem]), queue.end(), s,
                              [](const Signal& a, const Signal& b) { return a.cycle < b.cycle; });
  queue.insert(pos, s);
}

void DmaTracker::signal(int sem, int count, uint64_t cycle) {
  queue_signal(sem, {cycle, count, 0});
  available_[sem] += count;
}

uint64_t DmaTracker::wait(int sem, int count) {
  if (available(sem) < count) throw std::logic_error("vtpu: a semaphore wait for signals that were never sent");
  available_[sem] -= count;
  auto& queue = signals_[sem];
  uint64_t ready_cycle = 0;
  int needed = count;
  size_t& front = consumed_[sem];
  while (needed > 0) {
    Signal& s = queue[front];
    ready_cycle = std::max(ready_cycle, s.cycle);
    const int take = std::min(needed, s.count);
    needed -= take;
    s.count -= take;
    if (s.count == 0) {
      if (auto it = in_flight_.find(s.dma_sequence); it != in_flight_.end()) {
        vmem_index_.remove(it->second.vmem, it->first);
        hbm_index_.remove(it->second.hbm, it->first);
        in_flight_.erase(it);
      }
      if (++front == queue.size()) {  // all consumed: reuse the storage from its start
        queue.clear();
        front = 0;
      } else if (front >= 64 && 2 * front >= queue.size()) {  // a pipeline that never drains
        queue.erase(queue.begin(), queue.begin() + std::ptrdiff_t(front));
        front = 0;
      }
    }
  }
  return ready_cycle;
}

}  // namespace vtpu::sim
