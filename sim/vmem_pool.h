// VMEM buffers reused across launches. A launch starts with zeroed VMEM (kernels rely on padding
// they never write being zero), and a fresh 128 MiB calloc per launch costs a mapping, a page
// fault per page touched and an unmapping: most of a small kernel's host time. The pool hands out
// zeroed buffers and takes them back with the pages the launch wrote, which it zeroes again.
#pragma once

#include <array>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <vector>

namespace vtpu::sim {

struct FreeDeleter {
  void operator()(uint8_t* p) const { std::free(p); }
};
using VmemBuffer = std::unique_ptr<uint8_t, FreeDeleter>;

// A zeroed buffer of `bytes` (calloc: pages are only touched when used).
VmemBuffer zeroed_vmem(uint64_t bytes);

// A buffer written past this is freed instead of pooled: its pages would stay resident, and a
// launch that uses that much VMEM runs long enough not to notice a fresh mapping.
inline constexpr uint64_t kVmemPoolKeepBelow = uint64_t{16} << 20;

// The 4 KiB pages of a VMEM buffer that a launch wrote: what the pool zeroes again. Kernels place
// buffers far apart (a small add wrote three pages, the highest near 900 KiB), so zeroing all below
// the highest write cost most of a small launch's host time.
class VmemDirtyPages {
 public:
  void mark(uint64_t lo, uint64_t hi);  // bytes [lo, hi) were written
  bool beyond_pool() const { return beyond_; }
  // Zeroes every written page of `buffer` (of `bytes`), runs of pages at a time.
  void zero(uint8_t* buffer, uint64_t bytes) const;

 private:
  static constexpr int kPageShift = 12;
  static constexpr uint64_t kPages = kVmemPoolKeepBelow >> kPageShift;
  std::array<uint64_t, kPages / 64> bits_{};
  bool beyond_ = false;
};

class VmemPool {
 public:
  explicit VmemPool(uint64_t bytes) : bytes_(bytes) {}
  VmemBuffer take();
  // `buffer` back with the pages it was written in (zeroed here before it is handed out again).
  void give_back(VmemBuffer buffer, const VmemDirtyPages& dirty);

 private:
  uint64_t bytes_;
  std::mutex mutex_;  // cores of one launch run in parallel
  std::vector<VmemBuffer> free_;
};

}  // namespace vtpu::sim
