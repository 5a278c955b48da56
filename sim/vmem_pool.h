// VMEM buffers reused across launches. A launch starts with zeroed VMEM (kernels rely on padding
// they never write being zero), and a fresh 128 MiB calloc per launch costs a mapping, a page
// fault per page touched and an unmapping: most of a small kernel's host time. The pool hands out
// zeroed buffers and takes them back with the extent the launch wrote, which it zeroes again.
#pragma once

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

class VmemPool {
 public:
  explicit VmemPool(uint64_t bytes) : bytes_(bytes) {}
  VmemBuffer take();
  // `buffer` back, written only below `dirty_end` (zeroed here before it is handed out again). A
  // buffer written past kKeepBelow is freed instead: its pages would stay resident, and a launch
  // that uses that much VMEM runs long enough not to notice a fresh mapping.
  void give_back(VmemBuffer buffer, uint64_t dirty_end);
  static constexpr uint64_t kKeepBelow = uint64_t{16} << 20;

 private:
  uint64_t bytes_;
  std::mutex mutex_;  // cores of one launch run in parallel
  std::vector<VmemBuffer> free_;
};

}  // namespace vtpu::sim
