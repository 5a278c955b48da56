// Kernels see HBM through 32-bit addresses: at launch each buffer argument is mapped into a
// per-launch window (with unmapped guard gaps between buffers), so scalar registers stay 32-bit,
// every DMA is checked against the argument it targets, and errors can name that argument.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "sim/hbm.h"

namespace vtpu::sim {

class ArgWindow {
 public:
  static constexpr uint64_t kFirstBase = 0x10000;
  static constexpr uint64_t kGuardBytes = 0x10000;

  // Returns the kernel-visible address of the buffer.
  uint32_t map(const std::string& name, HbmAddress physical, uint64_t bytes);
  // Host view of kernel address range [address, address + bytes); throws SimError naming `what`.
  std::span<uint8_t> view(Hbm& hbm, uint64_t address, uint64_t bytes, const std::string& what) const;

 private:
  struct Entry {
    std::string name;
    uint64_t base;
    HbmAddress physical;
    uint64_t bytes;
  };
  std::vector<Entry> entries_;
  uint64_t next_base_ = kFirstBase;
};

}  // namespace vtpu::sim
