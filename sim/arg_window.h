// Kernels see HBM through 32-bit addresses: at launch each buffer argument is mapped into a
// per-launch window (with unmapped guard gaps between buffers), so scalar registers stay 32-bit,
// every DMA is checked against the argument it targets, and errors can name that argument. A
// buffer may live in HBM or in VMEM held across launches (`on_chip`): a DMA to or from it is then a
// local copy, which the timing model prices without an HBM round trip.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "isa/address_window.h"
#include "sim/hbm.h"

namespace vtpu::sim {

class ArgWindow {
 public:
  // The window's layout (first base, guard gaps, 4 GiB) is the ISA's launch contract.
  static constexpr uint64_t kFirstBase = isa::kWindowFirstBase;
  static constexpr uint64_t kGuardBytes = isa::kWindowGuardBytes;

  // Returns the kernel-visible address of the buffer.
  uint32_t map(const std::string& name, Hbm& memory, HbmAddress physical, uint64_t bytes, bool on_chip = false);
  // Host view of kernel address range [address, address + bytes); throws SimError naming `what`.
  std::span<uint8_t> view(uint64_t address, uint64_t bytes, const std::string& what) const;
  // The same, `what` written only for an error: a DMA's description (its disassembly) cost more
  // host time than a small DMA itself.
  std::span<uint8_t> view(uint64_t address, uint64_t bytes, const std::function<std::string()>& what) const;
  // Whether the buffer argument holding kernel address `address` is held on chip.
  bool on_chip(uint64_t address) const;

 private:
  struct Entry {
    std::string name;
    uint64_t base;
    Hbm* memory;
    HbmAddress physical;
    uint64_t bytes;
    bool on_chip;
  };
  std::vector<Entry> entries_;
  uint64_t next_base_ = kFirstBase;
};

}  // namespace vtpu::sim
