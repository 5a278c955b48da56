// The PrivateUse1 allocator: storages get virtual addresses from the Runtime, backed by the
// simulated chip's HBM when they must hold data. Memory statistics are the device's HBM counters,
// so torch.accelerator.memory_allocated() and friends report simulated HBM.
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/impl/alloc_cpu.h>

#include "torch_bridge/csrc/runtime/runtime.h"

namespace vtpu::bridge {
namespace {

void delete_buffer(void* ptr) { Runtime::get().release(reinterpret_cast<uint64_t>(ptr)); }

class TpuAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t bytes) override {
    const int device = current_device_index();
    const uint64_t vaddr = Runtime::get().allocate(device, bytes);
    void* ptr = reinterpret_cast<void*>(vaddr);
    return {ptr, ptr, &delete_buffer, c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(device))};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &delete_buffer; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    auto& rt = Runtime::get();
    const uint64_t d = reinterpret_cast<uint64_t>(dest), s = reinterpret_cast<uint64_t>(src);
    rt.device(rt.buffer(d).device).copy_on_device(rt.materialize(d), rt.materialize(s), count);
  }

  bool initialized() override { return true; }
  void emptyCache(c10::MempoolId_t) override {}
  void recordStream(const c10::DataPtr&, c10::Stream) override {}

  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    const auto m = Runtime::get().device(device).memory_stats();
    c10::CachingDeviceAllocator::DeviceStats stats;
    auto& a = stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)];
    a.current = static_cast<int64_t>(m.allocated_bytes);
    a.peak = static_cast<int64_t>(m.peak_allocated_bytes);
    auto& r = stats.reserved_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)];
    r.current = a.current;
    r.peak = a.peak;
    return stats;
  }
  void resetAccumulatedStats(c10::DeviceIndex) override {}
  void resetPeakStats(c10::DeviceIndex device) override { Runtime::get().device(device).reset_peak_memory(); }
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    const auto m = Runtime::get().device(device).memory_stats();
    return {m.capacity_bytes - m.allocated_bytes, m.capacity_bytes};
  }

  static int current_device_index();
};

TpuAllocator allocator;

}  // namespace

void set_current_device_index(int index);
int current_device_index();

int TpuAllocator::current_device_index() { return bridge::current_device_index(); }

}  // namespace vtpu::bridge

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &vtpu::bridge::allocator);
