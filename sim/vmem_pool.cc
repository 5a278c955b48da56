#include "sim/vmem_pool.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <new>

namespace vtpu::sim {

VmemBuffer zeroed_vmem(uint64_t bytes) {
  VmemBuffer buffer(static_cast<uint8_t*>(std::calloc(bytes, 1)));
  if (!buffer) throw std::bad_alloc();
  return buffer;
}

VmemBuffer VmemPool::take() {
  {
    std::lock_guard lock(mutex_);
    if (!free_.empty()) {
      VmemBuffer buffer = std::move(free_.back());
      free_.pop_back();
      return buffer;
    }
  }
  return zeroed_vmem(bytes_);
}

void VmemDirtyPages::mark(uint64_t lo, uint64_t hi) {
  if (hi <= lo || beyond_) return;
  if (hi > kVmemPoolKeepBelow) {
    beyond_ = true;
    return;
  }
  for (uint64_t page = lo >> kPageShift; page <= (hi - 1) >> kPageShift; ++page) bits_[page / 64] |= uint64_t{1} << (page % 64);
}

void VmemDirtyPages::zero(uint8_t* buffer, uint64_t bytes) const {
  // Runs of set bits, a word of 64 pages at a time (most words are empty).
  uint64_t page = 0;
  while (page < kPages) {
    const uint64_t word = bits_[page / 64] >> (page % 64);
    if (word == 0) {
      page = (page / 64 + 1) * 64;
      continue;
    }
    page += std::countr_zero(word);
    const uint64_t first = page;
    while (page < kPages && (bits_[page / 64] >> (page % 64) & 1)) ++page;
    const uint64_t lo = first << kPageShift, hi = std::min(page << kPageShift, bytes);
    if (lo < hi) std::memset(buffer + lo, 0, hi - lo);
  }
}

void VmemPool::give_back(VmemBuffer buffer, const VmemDirtyPages& dirty) {
  if (dirty.beyond_pool()) return;
  dirty.zero(buffer.get(), bytes_);
  std::lock_guard lock(mutex_);
  free_.push_back(std::move(buffer));
}

}  // namespace vtpu::sim
