#include "sim/vmem_pool.h"

#include <algorithm>
#include <cstring>
#include <new>

namespace vtpu::sim {

VmemBuffer zeroed_vmem(uint64_t bytes) {
  VmemBuffer buffer(static_cast<uint8_t*>(std::calloc(bytes, 1)));
  if (!buffer) throw std::bad_alloc();
  return buffer;
}

VmemBuffer VmemPool::take() {
  {
    std::lock_guard lock(mutex_);
    if (!free_.empty()) {
      VmemBuffer buffer = std::move(free_.back());
      free_.pop_back();
      return buffer;
    }
  }
  return zeroed_vmem(bytes_);
}

void VmemPool::give_back(VmemBuffer buffer, uint64_t dirty_end) {
  if (dirty_end > kKeepBelow) return;
  std::memset(buffer.get(), 0, std::min(dirty_end, bytes_));
  std::lock_guard lock(mutex_);
  free_.push_back(std::move(buffer));
}

}  // namespace vtpu::sim
