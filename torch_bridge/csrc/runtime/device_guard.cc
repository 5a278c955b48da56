// Device management for PrivateUse1: the current device (per thread, like CUDA), a device guard
// with one default stream per device (launches complete synchronously on the simulated timeline,
// so events and stream synchronisation reduce to flushing pending work), and the PrivateUse1
// hooks torch asks for availability, device count and generators.
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "torch_bridge/csrc/record/recorder.h"
#include "torch_bridge/csrc/runtime/philox_generator.h"
#include "torch_bridge/csrc/runtime/pinned_host_allocator.h"
#include "torch_bridge/csrc/runtime/runtime.h"

namespace vtpu::bridge {

namespace {
thread_local int current_device = 0;
}

int current_device_index() { return current_device; }
void set_current_device_index(int index) {
  TORCH_CHECK(index >= 0 && index < Runtime::get().device_count(), "vtpu: device tpu:", index, " does not exist (",
              Runtime::get().device_count(), " simulated chips)");
  current_device = index;
}

void synchronize_device(int index) { Recorder::of(index).flush(); }

namespace {

struct TpuGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  static constexpr c10::DeviceType kType = c10::DeviceType::PrivateUse1;
  TpuGuardImpl() = default;
  explicit TpuGuardImpl(c10::DeviceType t) { TORCH_CHECK(t == kType, "vtpu guard for ", t); }
  c10::DeviceType type() const override { return kType; }
  c10::Device exchangeDevice(c10::Device d) const override {
    const int old = current_device_index();
    if (d.index() >= 0) set_current_device_index(d.index());
    return {kType, static_cast<c10::DeviceIndex>(old)};
  }
  c10::Device getDevice() const override { return {kType, static_cast<c10::DeviceIndex>(current_device_index())}; }
  void setDevice(c10::Device d) const override {
    if (d.index() >= 0) set_current_device_index(d.index());
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    if (d.index() >= 0 && d.index() < Runtime::get().device_count()) current_device = d.index();
  }
  c10::Stream getStream(c10::Device d) const noexcept override { return c10::Stream(c10::Stream::DEFAULT, d); }
  c10::Stream getDefaultStream(c10::Device d) const override { return c10::Stream(c10::Stream::DEFAULT, d); }
  c10::Stream getNewStream(c10::Device d, int) const override { return c10::Stream(c10::Stream::DEFAULT, d); }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool) const override { return c10::Stream(c10::Stream::DEFAULT, d); }
  c10::Stream exchangeStream(c10::Stream s) const noexcept override { return s; }
  c10::DeviceIndex deviceCount() const noexcept override {
    try {
      return static_cast<c10::DeviceIndex>(Runtime::get().device_count());
    } catch (...) {
      return 0;  // required not to throw: a broken configuration reports no devices
    }
  }
  // Events: work is complete once flushed, so recording an event flushes the device and notes the
  // device's simulated clock then; elapsed_time between two events is simulated time, in ms, as
  // CUDA events time the GPU.
  struct TpuEvent {
    int device = 0;
    double seconds = 0;
    bool recorded = false;
  };
  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex, const c10::EventFlag) const override {
    synchronize_device(stream.device_index());
    if (*event == nullptr) *event = new TpuEvent;
    auto* e = static_cast<TpuEvent*>(*event);
    e->device = stream.device_index() < 0 ? current_device_index() : stream.device_index();
    auto& rt = Runtime::get();
    std::lock_guard lock(rt.mutex());
    e->seconds = rt.simulated_clock(e->device);
    e->recorded = true;
  }
  double elapsedTime(void* start, void* end, const c10::DeviceIndex) const override {
    const auto *a = static_cast<TpuEvent*>(start), *b = static_cast<TpuEvent*>(end);
    TORCH_CHECK(a && b && a->recorded && b->recorded, "Both events must be recorded before calculating elapsed time.");
    TORCH_CHECK(a->device == b->device, "vtpu: events recorded on tpu:", a->device, " and tpu:", b->device,
                " (elapsed time compares one device's clock)");
    return (b->seconds - a->seconds) * 1e3;
  }
  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override { delete static_cast<TpuEvent*>(event); }
  void block(void*, const c10::Stream&) const override {}
  bool queryEvent(void*) const override { return true; }
  bool queryStream(const c10::Stream&) const override { return true; }
  void synchronizeStream(const c10::Stream& stream) const override { synchronize_device(stream.device_index()); }
  void synchronizeEvent(void*) const override {}
  void synchronizeDevice(const c10::DeviceIndex index) const override { synchronize_device(index); }
};

struct TpuHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return Runtime::get().device_count() > 0; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  c10::DeviceIndex deviceCount() const override { return static_cast<c10::DeviceIndex>(Runtime::get().device_count()); }
  void setCurrentDevice(c10::DeviceIndex d) const override { set_current_device_index(d); }
  c10::DeviceIndex getCurrentDevice() const override { return static_cast<c10::DeviceIndex>(current_device_index()); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex d) const override {
    const int old = current_device_index();
    set_current_device_index(d);
    return static_cast<c10::DeviceIndex>(old);
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex d) const override {
    if (d < 0 || d >= Runtime::get().device_count()) return getCurrentDevice();
    return exchangeDevice(d);
  }
  at::Device getDeviceFromPtr(void* data) const override {
    return {c10::DeviceType::PrivateUse1,
            static_cast<c10::DeviceIndex>(Runtime::get().buffer(reinterpret_cast<uint64_t>(data)).device)};
  }
  bool isPinnedPtr(const void* ptr) const override { return is_pinned_host_pointer(ptr); }
  at::Allocator* getPinnedMemoryAllocator() const override { return pinned_host_allocator(); }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t new_bytes) const override;
  const at::Generator& getDefaultGenerator(c10::DeviceIndex device) const override;
  at::Generator getNewGenerator(c10::DeviceIndex device) const override {
    return make_philox_generator(device < 0 ? current_device_index() : device, c10::default_rng_seed_val);
  }
};

}  // namespace

C10_REGISTER_GUARD_IMPL(PrivateUse1, TpuGuardImpl);

// Each device's default generator (seeded by torch.tpu.manual_seed) hands every random op its
// Philox key (philox_generator.h).
const at::Generator& TpuHooks::getDefaultGenerator(c10::DeviceIndex device) const {
  static std::vector<at::Generator> generators;
  static std::once_flag once;
  std::call_once(once, [] {
    for (int i = 0; i < Runtime::get().device_count(); ++i) generators.push_back(make_philox_generator(i, 0x7a5 + i));
  });
  const int index = device < 0 ? current_device_index() : device;
  TORCH_CHECK(index < static_cast<int>(generators.size()), "vtpu: no generator for tpu:", index);
  return generators[index];
}

void TpuHooks::resizePrivateUse1Bytes(const c10::Storage& storage, size_t new_bytes) const {
  // Grow by allocating a new buffer and copying what the old one held (after pending work lands).
  auto& rt = Runtime::get();
  const uint64_t old_vaddr = reinterpret_cast<uint64_t>(storage.data());
  const uint64_t old_bytes = storage.nbytes();
  c10::DataPtr fresh = storage.allocator()->allocate(new_bytes);
  if (old_bytes > 0 && storage.data()) {
    Recorder::of(rt.buffer(old_vaddr).device).flush();
    const uint64_t new_vaddr = reinterpret_cast<uint64_t>(fresh.get());
    rt.device(rt.buffer(old_vaddr).device)
        .copy_on_device(rt.materialize(new_vaddr), rt.materialize(old_vaddr), std::min<uint64_t>(old_bytes, new_bytes));
  }
  const_cast<c10::Storage&>(storage).set_data_ptr_noswap(std::move(fresh));
  const_cast<c10::Storage&>(storage).set_nbytes(new_bytes);
}

void register_hooks() {
  static TpuHooks hooks;
  at::RegisterPrivateUse1HooksInterface(&hooks);
}

}  // namespace vtpu::bridge
