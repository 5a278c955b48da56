// Kernels address HBM with 32-bit scalars: at launch each buffer argument is mapped into a 4 GiB
// window, one after another with unmapped guard gaps between them (sim::ArgWindow does the
// mapping). The layout is part of the launch contract, so the fusion planner can check that a
// kernel's operands will fit before it makes one kernel of several ops.
#pragma once

#include <cstdint>
#include <span>

namespace vtpu::isa {

inline constexpr uint64_t kWindowFirstBase = 0x10000;
inline constexpr uint64_t kWindowGuardBytes = 0x10000;
inline constexpr uint64_t kWindowBytes = uint64_t{1} << 32;

// Where the buffer after one of `bytes` at `base` starts: past a guard gap, on a 4 KiB boundary.
inline constexpr uint64_t next_window_base(uint64_t base, uint64_t bytes) {
  return (base + bytes + kWindowGuardBytes + 0xfff) & ~uint64_t{0xfff};
}

// Whether one launch's buffers of these sizes fit the window, laid out in order (tests shrink
// `window` to exercise at small sizes what only gigabytes reach).
inline bool window_fits(std::span<const uint64_t> buffer_bytes, uint64_t window = kWindowBytes) {
  uint64_t base = kWindowFirstBase;
  for (uint64_t b : buffer_bytes) {
    if (base + b > window - 1) return false;
    base = next_window_base(base, b);
  }
  return true;
}

}  // namespace vtpu::isa
