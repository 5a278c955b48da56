// HBM: an address space of the chip's capacity with a first-fit allocator. Only allocated ranges
// have host backing (a 192 GiB chip must not need 192 GiB of host memory). Every access is checked
// against the allocation that contains it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>

#include "sim/hbm_address.h"

namespace vtpu::sim {

class Hbm {
 public:
  // Addresses start at kBase so that 0 is never a valid buffer (a null pointer stays null).
  static constexpr HbmAddress kBase = 0x1000;
  static constexpr uint64_t kAlignment = 512;

  // `base` and `name` let a second address space (VMEM held across launches) reuse the allocator:
  // its addresses never overlap HBM's, and its errors say which memory they are about.
  explicit Hbm(uint64_t capacity_bytes, HbmAddress base = kBase, std::string name = "HBM");

  HbmAddress allocate(uint64_t bytes);  // throws OutOfMemoryError with requested/free/total
  // What an allocation of `bytes` takes from the capacity: rounded up to kAlignment, at least one
  // unit (so forecasts of a run's memory count what the allocator will).
  static uint64_t reserved_bytes(uint64_t bytes) {
    return bytes <= kAlignment ? kAlignment : (bytes + kAlignment - 1) / kAlignment * kAlignment;
  }
  void free(HbmAddress address);        // throws SimError for an address that is not an allocation start
  uint64_t capacity_bytes() const { return capacity_; }
  bool contains(HbmAddress address) const { return address >= base_ && address - base_ < capacity_; }
  uint64_t allocated_bytes() const;
  uint64_t peak_allocated_bytes() const;
  void reset_peak() ;

  // Host view of [address, address + bytes); throws SimError(OutOfBounds) naming `what` unless the
  // whole range lies inside one live allocation.
  std::span<uint8_t> view(HbmAddress address, uint64_t bytes, const std::string& what);
  // Whether view() would succeed: a check that formats no name (launches check every argument).
  bool holds(HbmAddress address, uint64_t bytes) const;

 private:
  struct Allocation {
    uint64_t bytes;          // as requested
    uint64_t reserved;       // rounded to kAlignment
    std::unique_ptr<uint8_t, void (*)(void*)> data;  // calloc'ed: untouched pages cost no host memory
  };
  uint64_t capacity_;
  HbmAddress base_;
  std::string name_;
  uint64_t allocated_ = 0;   // reserved bytes in use
  uint64_t peak_ = 0;
  std::map<HbmAddress, Allocation> live_;
  mutable std::mutex mutex_;
};

}  // namespace vtpu::sim
