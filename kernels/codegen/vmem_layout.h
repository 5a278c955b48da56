// A kernel's VMEM buffers laid out one after another, each starting on a 512-byte boundary (what
// the generators' DMAs and vector accesses assume). Schedules place their buffers with it; its
// end is the VMEM the kernel uses, which they check against the chip's kernel VMEM.
#pragma once

#include <cstdint>

#include "kernels/codegen/vreg_shape.h"

namespace vtpu::kernels {

class VmemLayout {
 public:
  static constexpr int64_t kAlignment = 512;

  // The address of a new buffer of `bytes`.
  uint64_t place(uint64_t bytes) {
    const uint64_t at = end_;
    end_ += round_up(static_cast<int64_t>(bytes), kAlignment);
    return at;
  }
  // Everything placed so far `copies` times over, back to back: sets of buffers a kernel
  // alternates between (the first set's addresses stay; set k is k * end() further on).
  void repeat(int copies) { end_ *= copies; }
  uint64_t end() const { return end_; }

 private:
  uint64_t end_ = 0;
};

}  // namespace vtpu::kernels
