// What one chip of a slice launch sees of the others: their HBM through the same kernel address
// window (every chip maps the same arguments in the same order), the ICI links between them, and
// their semaphores. A single-chip launch has none, and dma.remote there is an error.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "sim/dma_tracker.h"

namespace vtpu::sim {

class SlicePeers {
 public:
  virtual ~SlicePeers() = default;
  virtual int chip_count() const = 0;
  // Host view of kernel address range [address, address + bytes) on chip `chip`; throws SimError
  // naming `what` when it is not inside one of that chip's buffer arguments.
  virtual std::span<uint8_t> view(int chip, uint64_t address, uint64_t bytes, const std::string& what) = 0;
  // Moves `bytes` from chip `src` to chip `dst` over the links of their route, starting no
  // earlier than `ready_cycle`; returns the cycle the last byte lands.
  virtual uint64_t transfer(int src, int dst, uint64_t bytes, uint64_t ready_cycle) = 0;
  // The destination's side of a remote copy: `inbound` (its HBM region written, the semaphore it
  // signals, when it lands) joins chip `dst`'s in-flight DMAs.
  virtual void deliver(int dst, const DmaRecord& inbound) = 0;
};

}  // namespace vtpu::sim
