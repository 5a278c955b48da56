// First-fit over the gaps between live allocations (kept ordered in a map), so freed space is
// reused and fragmentation is what a simple device allocator would show.
#include "sim/hbm.h"

#include <fmt/format.h>

#include <cstdlib>

#include "sim/sim_error.h"

namespace vtpu::sim {

Hbm::Hbm(uint64_t capacity_bytes, HbmAddress base, std::string name)
    : capacity_(capacity_bytes), base_(base), name_(std::move(name)) {}

HbmAddress Hbm::allocate(uint64_t bytes) {
  std::lock_guard lock(mutex_);
  const uint64_t reserved = reserved_bytes(bytes);
  const HbmAddress end = base_ + capacity_;
  HbmAddress candidate = base_;
  for (const auto& [start, alloc] : live_) {
    if (start >= candidate && start - candidate >= reserved) break;
    candidate = std::max(candidate, start + alloc.reserved);
  }
  if (reserved > capacity_ || candidate > end - reserved) {
    const uint64_t free_bytes = capacity_ - allocated_;
    throw OutOfMemoryError(
        fmt::format("{} out of memory: tried to allocate {} bytes ({:.2f} MiB); {} bytes free of {} total "
                    "({:.2f} of {:.2f} GiB){}",
                    name_, bytes, bytes / 1048576.0, free_bytes, capacity_, free_bytes / 1073741824.0,
                    capacity_ / 1073741824.0, free_bytes >= reserved ? " (free space is fragmented)" : ""),
        bytes, free_bytes, capacity_);
  }
  auto* storage = static_cast<uint8_t*>(std::calloc(reserved, 1));
  if (!storage) {
    throw OutOfMemoryError(fmt::format("host memory exhausted backing a {}-byte {} allocation", bytes, name_), bytes,
                           capacity_ - allocated_, capacity_);
  }
  Allocation alloc{bytes, reserved, std::unique_ptr<uint8_t, void (*)(void*)>(storage, std::free)};
  live_.emplace(candidate, std::move(alloc));
  allocated_ += reserved;
  peak_ = std::max(peak_, allocated_);
  return candidate;
}

void Hbm::free(HbmAddress address) {
  std::lock_guard lock(mutex_);
  auto it = live_.find(address);
  if (it == live_.end()) {
    throw SimError(SimErrorKind::OutOfBounds, fmt::format("{} free of 0x{:x}, which is not an allocation", name_, address));
  }
  allocated_ -= it->second.reserved;
  live_.erase(it);
}

uint64_t Hbm::allocated_bytes() const {
  std::lock_guard lock(mutex_);
  return allocated_;
}

uint64_t Hbm::peak_allocated_bytes() const {
  std::lock_guard lock(mutex_);
  return peak_;
}

void Hbm::reset_peak() {
  std::lock_guard lock(mutex_);
  peak_ = allocated_;
}

bool Hbm::holds(HbmAddress address, uint64_t bytes) const {
  std::lock_guard lock(mutex_);
  auto it = live_.upper_bound(address);
  if (it == live_.begin()) return false;
  --it;
  const uint64_t offset = address - it->first;
  return offset <= it->second.bytes && bytes <= it->second.bytes - offset;
}

std::span<uint8_t> Hbm::view(HbmAddress address, uint64_t bytes, const std::string& what) {
  std::lock_guard lock(mutex_);
  auto it = live_.upper_bound(address);
  if (it != live_.begin()) {
    --it;
    const uint64_t offset = address - it->first;
    if (offset <= it->second.bytes && bytes <= it->second.bytes - offset) {
      return {it->second.data.get() + offset, bytes};
    }
    throw SimError(SimErrorKind::OutOfBounds,
                   fmt::format("{}: {} access [0x{:x}, 0x{:x}) runs outside allocation [0x{:x}, 0x{:x}) of {} bytes",
                               what, name_, address, address + bytes, it->first, it->first + it->second.bytes,
                               it->second.bytes));
  }
  throw SimError(SimErrorKind::OutOfBounds,
                 fmt::format("{}: {} access [0x{:x}, 0x{:x}) is not inside any allocation", what, name_, address,
                             address + bytes));
}

}  // namespace vtpu::sim
