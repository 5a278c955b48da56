// An address in a chip's HBM (or in the held-VMEM address space, which never overlaps it): what
// the Device interface hands out and launches take. Apart from the allocator (hbm.h), so code
// above the sim::Device seam sees addresses, not the simulator's allocator.
#pragma once

#include <cstdint>

namespace vtpu::sim {

using HbmAddress = uint64_t;

}  // namespace vtpu::sim
