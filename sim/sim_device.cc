#include "sim/sim_device.h"

#include <fmt/format.h>

#include <cstring>

#include "sim/executor.h"
#include "sim/sim_error.h"

namespace vtpu::sim {

namespace {
// Held VMEM's addresses start past any HBM (the largest preset has 192 GiB), so one address says
// which memory it is in.
constexpr HbmAddress kHeldBase = HbmAddress{1} << 48;
}  // namespace

SimDevice::SimDevice(ChipConfig chip, SimOptions options)
    : chip_(std::move(chip)),
      options_(options),
      hbm_(chip_.hbm_bytes),
      held_(chip_.vmem_held_bytes, kHeldBase, "held VMEM"),
      vmem_pool_(chip_.kernel_vmem_bytes()) {}

HbmAddress SimDevice::allocate(uint64_t bytes) {
  const HbmAddress a = hbm_.allocate(bytes);
  note_combined_peak();
  return a;
}

std::optional<HbmAddress> SimDevice::allocate_held(uint64_t bytes) {
  try {
    const HbmAddress a = held_.allocate(bytes);
    note_combined_peak();
    return a;
  } catch (const OutOfMemoryError&) {
    return std::nullopt;
  }
}

void SimDevice::note_combined_peak() {
  std::lock_guard lock(mutex_);
  peak_combined_ = std::max(peak_combined_, hbm_.allocated_bytes() + held_.allocated_bytes());
}

void SimDevice::free(HbmAddress address) { memory_at(address).free(address); }

// Copies of zero bytes return first: an empty span's data() may be null, which memcpy must not get.
void SimDevice::copy_to_device(HbmAddress dst, std::span<const uint8_t> src) {
  if (src.empty()) return;
  auto view = memory_at(dst).view(dst, src.size(), "copy to device");
  if (!options_.timing_only) std::memcpy(view.data(), src.data(), src.size());
  std::lock_guard lock(mutex_);
  counters_.host_to_device_bytes += src.size();
}

void SimDevice::copy_to_host(std::span<uint8_t> dst, HbmAddress src) {
  if (dst.empty()) return;
  auto view = memory_at(src).view(src, dst.size(), "copy to host");
  if (options_.timing_only) std::memset(dst.data(), 0, dst.size());  // placeholders: HBM holds no values
  else std::memcpy(dst.data(), view.data(), dst.size());
  std::lock_guard lock(mutex_);
  counters_.device_to_host_bytes += dst.size();
}

void SimDevice::copy_on_device(HbmAddress dst, HbmAddress src, uint64_t bytes) {
  if (bytes == 0) return;
  auto from = memory_at(src).view(src, bytes, "device copy source");
  auto to = memory_at(dst).view(dst, bytes, "device copy destination");
  if (!options_.timing_only) std::memmove(to.data(), from.data(), bytes);
}

LaunchId SimDevice::launch(const isa::Program& program, std::span<const KernelArg> args) {
  std::lock_guard lock(mutex_);
  if (trace_) {
    trace_->set_time_offset(trace_origin_ ? trace_origin_->first + (counters_.cycles - trace_origin_->second) : counters_.cycles);
  }
  LaunchResult result = execute(program, prepared_.get(program, chip_), args, chip_, hbm_, options_, trace_, &vmem_pool_, &held_);
  ++counters_.launches;
  counters_.cycles += result.cycles;
  counters_.hbm_read_bytes += result.summary.hbm_read_bytes;
  counters_.hbm_write_bytes += result.summary.hbm_write_bytes;
  const LaunchId id = next_id_++;
  finished_.emplace(id, std::move(result));
  return id;
}

void SimDevice::set_trace_origin(uint64_t cycle) {
  std::lock_guard lock(mutex_);
  trace_origin_ = std::make_pair(cycle, counters_.cycles);
}

LaunchResult SimDevice::wait(LaunchId id) {
  std::lock_guard lock(mutex_);
  auto it = finished_.find(id);
  if (it == finished_.end()) throw SimError(SimErrorKind::BadLaunch, fmt::format("unknown or already waited launch {}", id));
  LaunchResult result = std::move(it->second);
  finished_.erase(it);
  return result;
}

DeviceCounters SimDevice::counters() const {
  std::lock_guard lock(mutex_);
  return counters_;
}

MemoryStats SimDevice::memory_stats() const {
  return {hbm_.allocated_bytes(),  hbm_.peak_allocated_bytes(),  hbm_.capacity_bytes(),
          held_.allocated_bytes(), held_.peak_allocated_bytes(), held_.capacity_bytes(), peak_combined_};
}

void NullDevice::copy_to_device(HbmAddress dst, std::span<const uint8_t> src) {
  if (src.empty()) return;
  std::memcpy(hbm_.view(dst, src.size(), "copy to device").data(), src.data(), src.size());
}
void NullDevice::copy_to_host(std::span<uint8_t> dst, HbmAddress src) {
  if (dst.empty()) return;
  std::memcpy(dst.data(), hbm_.view(src, dst.size(), "copy to host").data(), dst.size());
}
void NullDevice::copy_on_device(HbmAddress dst, HbmAddress src, uint64_t bytes) {
  if (bytes == 0) return;
  std::memmove(hbm_.view(dst, bytes, "device copy").data(), hbm_.view(src, bytes, "device copy").data(), bytes);
}

void SimDevice::reset_peak_memory() {
  std::lock_guard lock(mutex_);
  hbm_.reset_peak();
  held_.reset_peak();
  peak_combined_ = hbm_.allocated_bytes() + held_.allocated_bytes();
}

std::unique_ptr<Device> make_sim_device(ChipConfig chip) { return std::make_unique<SimDevice>(std::move(chip)); }

}  // namespace vtpu::sim
