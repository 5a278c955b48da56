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

const DmaRecord* DmaTracker::vmem_read_conflict(const Region& r) const {
  for (const auto& d : in_flight_) {
    if (d.to_vmem && overlaps(r, d.vmem)) return &d;
  }
  return nullptr;
}

const DmaRecord* DmaTracker::vmem_write_conflict(const Region& r) const {
  for (const auto& d : in_flight_) {
    if (overlaps(r, d.vmem)) return &d;
  }
  return nullptr;
}

const DmaRecord* DmaTracker::hbm_read_conflict(const Region& r) const {
  for (const auto& d : in_flight_) {
    if (!d.to_vmem && overlaps(r, d.hbm)) return &d;
  }
  return nullptr;
}

const DmaRecord* DmaTracker::hbm_write_conflict(const Region& r) const {
  for (const auto& d : in_flight_) {
    if (overlaps(r, d.hbm)) return &d;
  }
  return nullptr;
}

const DmaRecord* DmaTracker::remote_write_conflict(const Region& r, uint64_t start_cycle) const {
  for (const auto& d : in_flight_) {
    if (d.done_cycle > start_cycle && overlaps(r, d.hbm)) return &d;
  }
  return nullptr;
}

void DmaTracker::add(DmaRecord record) {
  record.sequence = next_sequence_++;
  last_completion_ = std::max(last_completion_, record.done_cycle);
  auto& queue = signals_[record.sem];
  const Signal s{record.done_cycle, 1, record.sequence};
  // Keep landing order; ties keep issue order.
  auto pos = std::upper_bound(queue.begin(), queue.end(), s,
                              [](const Signal& a, const Signal& b) { return a.cycle < b.cycle; });
  queue.insert(pos, s);
  in_flight_.push_back(record);
}

void DmaTracker::signal(int sem, int count, uint64_t cycle) {
  auto& queue = signals_[sem];
  const Signal s{cycle, count, 0};
  auto pos = std::upper_bound(queue.begin(), queue.end(), s,
                              [](const Signal& a, const Signal& b) { return a.cycle < b.cycle; });
  queue.insert(pos, s);
}

int DmaTracker::available(int sem) const {
  int count = 0;
  for (const auto& s : signals_[sem]) count += s.count;
  return count;
}

uint64_t DmaTracker::wait(int sem, int count) {
  if (available(sem) < count) throw std::logic_error("vtpu: a semaphore wait for signals that were never sent");
  auto& queue = signals_[sem];
  uint64_t ready_cycle = 0;
  int needed = count;
  while (needed > 0) {
    Signal& s = queue.front();
    ready_cycle = std::max(ready_cycle, s.cycle);
    const int take = std::min(needed, s.count);
    needed -= take;
    s.count -= take;
    if (s.count == 0) {
      if (s.dma_sequence != 0) {
        const uint64_t seq = s.dma_sequence;
        std::erase_if(in_flight_, [seq](const DmaRecord& d) { return d.sequence == seq; });
      }
      queue.pop_front();
    }
  }
  return ready_cycle;
}

}  // namespace vtpu::sim
