// Device backed by the simulator. Launches run synchronously inside launch() (the simulated
// timeline is what is asynchronous); wait() hands back the result. An optional trace recorder
// receives every launch, placed back to back on one timeline.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <utility>

#include "sim/device.h"
#include "sim/hbm.h"
#include "sim/prepared_program.h"
#include "sim/vmem_pool.h"
#include "traces/trace_recorder.h"

namespace vtpu::sim {

class SimDevice : public Device {
 public:
  explicit SimDevice(ChipConfig chip, SimOptions options = {});

  const ChipConfig& chip() const override { return chip_; }
  bool supports(isa::Opcode) const override { return true; }
  HbmAddress allocate(uint64_t bytes) override;
  std::optional<HbmAddress> allocate_held(uint64_t bytes) override;
  uint64_t allocation_bytes(uint64_t bytes) const override { return Hbm::reserved_bytes(bytes); }  // (held VMEM's too)
  void free(HbmAddress address) override;
  void copy_to_device(HbmAddress dst, std::span<const uint8_t> src) override;
  void copy_to_host(std::span<uint8_t> dst, HbmAddress src) override;
  void copy_on_device(HbmAddress dst, HbmAddress src, uint64_t bytes) override;
  LaunchId launch(const isa::Program& program, std::span<const KernelArg> args) override;
  LaunchResult wait(LaunchId id) override;
  DeviceCounters counters() const override;
  MemoryStats memory_stats() const override;
  void reset_peak_memory() override;

  void set_trace(traces::TraceRecorder* trace) override { trace_ = trace; }
  void set_trace_origin(uint64_t cycle) override;
  SimOptions& options() { return options_; }
  void set_interrupt_poll(std::function<void()> poll) override { options_.poll = std::move(poll); }
  void set_debug_checks(bool on) override { options_.check_uninitialized = on; }
  bool set_timing_only(bool on) override {
    options_.timing_only = on;
    return true;
  }
  bool timing_only() const override { return options_.timing_only; }

 private:
  ChipConfig chip_;
  SimOptions options_;
  Hbm& memory_at(HbmAddress address) { return held_.contains(address) ? held_ : hbm_; }
  void note_combined_peak();

  Hbm hbm_;
  Hbm held_;  // VMEM held across launches (chip.vmem_held_bytes), in its own address range
  uint64_t peak_combined_ = 0;  // of HBM and held VMEM allocated together
  traces::TraceRecorder* trace_ = nullptr;
  std::optional<std::pair<uint64_t, uint64_t>> trace_origin_;  // (trace cycle, device cycles then)
  mutable std::mutex mutex_;
  DeviceCounters counters_;
  LaunchId next_id_ = 1;
  std::map<LaunchId, LaunchResult> finished_;
  PreparedPrograms prepared_;  // verified and decoded once per distinct program
  VmemPool vmem_pool_;         // zeroed VMEM reused from launch to launch
};

// A Device that stores memory on the host and runs nothing: launches only count. For tests of
// code above the seam that must not depend on the simulator.
class NullDevice : public Device {
 public:
  explicit NullDevice(ChipConfig chip) : chip_(std::move(chip)), hbm_(chip_.hbm_bytes) {}
  const ChipConfig& chip() const override { return chip_; }
  bool supports(isa::Opcode) const override { return false; }
  HbmAddress allocate(uint64_t bytes) override { return hbm_.allocate(bytes); }
  void free(HbmAddress address) override { hbm_.free(address); }
  uint64_t allocation_bytes(uint64_t bytes) const override { return Hbm::reserved_bytes(bytes); }
  void copy_to_device(HbmAddress dst, std::span<const uint8_t> src) override;
  void copy_to_host(std::span<uint8_t> dst, HbmAddress src) override;
  void copy_on_device(HbmAddress dst, HbmAddress src, uint64_t bytes) override;
  LaunchId launch(const isa::Program&, std::span<const KernelArg>) override { return ++launches_; }
  LaunchResult wait(LaunchId) override { return {}; }
  DeviceCounters counters() const override { return {launches_, 0, 0, 0, 0, 0}; }
  MemoryStats memory_stats() const override {
    return {hbm_.allocated_bytes(), hbm_.peak_allocated_bytes(), hbm_.capacity_bytes()};
  }
  void reset_peak_memory() override { hbm_.reset_peak(); }

 private:
  ChipConfig chip_;
  Hbm hbm_;
  uint64_t launches_ = 0;
};

}  // namespace vtpu::sim
