#include "torch_bridge/csrc/runtime/pinned_host_allocator.h"

#include <c10/core/impl/alloc_cpu.h>

#include <map>
#include <mutex>

namespace vtpu::bridge {
namespace {

std::mutex& mutex() {
  static std::mutex m;
  return m;
}

// Live pinned allocations: start -> bytes (interior pointers, a slice's data, count too).
std::map<const char*, size_t>& live() {
  static std::map<const char*, size_t> m;
  return m;
}

void release(void* ptr) {
  {
    std::lock_guard lock(mutex());
    live().erase(static_cast<const char*>(ptr));
  }
  c10::free_cpu(ptr);
}

class PinnedHostAllocator final : public at::Allocator {
 public:
  at::DataPtr allocate(size_t bytes) override {
    void* ptr = c10::alloc_cpu(bytes);
    {
      std::lock_guard lock(mutex());
      live()[static_cast<const char*>(ptr)] = bytes;
    }
    return {ptr, ptr, &release, at::Device(at::DeviceType::CPU)};
  }
  at::DeleterFnPtr raw_deleter() const override { return &release; }
  void copy_data(void* dest, const void* src, std::size_t count) const override { default_copy_data(dest, src, count); }
};

}  // namespace

at::Allocator* pinned_host_allocator() {
  static PinnedHostAllocator allocator;
  return &allocator;
}

bool is_pinned_host_pointer(const void* ptr) {
  const char* p = static_cast<const char*>(ptr);
  std::lock_guard lock(mutex());
  auto it = live().upper_bound(p);
  if (it == live().begin()) return false;
  --it;
  return p < it->first + std::max<size_t>(it->second, 1);
}

}  // namespace vtpu::bridge
