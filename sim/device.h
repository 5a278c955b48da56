// The retargeting seam: everything above sim/ (the PyTorch bridge, tools) talks to a chip only
// through this interface. SimDevice implements it with the simulator; a real chip's runtime would
// be another implementation. Ownership: the caller owns allocations until free(); a LaunchId is
// valid until its wait() returns.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "isa/program.h"
#include "sim/chip_config.h"
#include "sim/launch.h"
#include "sim/slice_launch.h"
#include "traces/trace_recorder.h"

namespace vtpu::sim {

using LaunchId = uint64_t;

struct MemoryStats {
  uint64_t allocated_bytes = 0;
  uint64_t peak_allocated_bytes = 0;
  uint64_t capacity_bytes = 0;
  // VMEM held across launches (allocate_held): not HBM, so apart from the numbers above.
  uint64_t held_allocated_bytes = 0;
  uint64_t held_peak_bytes = 0;
  uint64_t held_capacity_bytes = 0;
  // The most HBM and held VMEM allocated at one moment (the two peaks above may fall at
  // different moments, so their sum overstates it).
  uint64_t peak_combined_bytes = 0;
};

struct DeviceCounters {
  uint64_t launches = 0;
  uint64_t cycles = 0;             // simulated cycles of all launches, back to back
  uint64_t hbm_read_bytes = 0;
  uint64_t hbm_write_bytes = 0;
  uint64_t host_to_device_bytes = 0;
  uint64_t device_to_host_bytes = 0;
};

class Device {
 public:
  virtual ~Device() = default;
  virtual const ChipConfig& chip() const = 0;
  virtual bool supports(isa::Opcode opcode) const = 0;

  virtual HbmAddress allocate(uint64_t bytes) = 0;  // throws OutOfMemoryError
  // On-chip memory that outlives a launch: VMEM held for a graph's intermediates between its
  // kernels (as XLA's memory-space assignment keeps values in VMEM across the ops of one
  // program). Kernels reach it by DMA like HBM, but a copy to or from it stays on chip. nullopt
  // when it is full or the device holds none: the caller then uses allocate(). free() releases it.
  virtual std::optional<HbmAddress> allocate_held(uint64_t bytes) {
    (void)bytes;
    return std::nullopt;
  }
  virtual void free(HbmAddress address) = 0;
  // What an allocation of `bytes` takes from its memory's capacity (the allocator's rounding), so
  // a caller can forecast what a run will hold (torch_bridge/plan_runner/plan_forecast.h).
  virtual uint64_t allocation_bytes(uint64_t bytes) const { return bytes; }
  virtual void copy_to_device(HbmAddress dst, std::span<const uint8_t> src) = 0;
  virtual void copy_to_host(std::span<uint8_t> dst, HbmAddress src) = 0;
  virtual void copy_on_device(HbmAddress dst, HbmAddress src, uint64_t bytes) = 0;

  virtual LaunchId launch(const isa::Program& program, std::span<const KernelArg> args) = 0;
  virtual LaunchResult wait(LaunchId id) = 0;

  virtual DeviceCounters counters() const = 0;
  virtual MemoryStats memory_stats() const = 0;
  virtual void reset_peak_memory() = 0;  // peak_allocated_bytes restarts from what is allocated now
  // Launches from now on are recorded into `trace` (nullptr: stop); the caller owns it. Devices
  // that cannot trace ignore it.
  virtual void set_trace(traces::TraceRecorder* trace) { (void)trace; }
  // Launches from now on are drawn from `cycle` on the trace (the caller's clock, which counts
  // waits for data in flight), back to back after it, instead of after the device's own cycles.
  virtual void set_trace_origin(uint64_t cycle) { (void)cycle; }
  // A function launches call every few ms of host time; it may throw to abandon the launch.
  virtual void set_interrupt_poll(std::function<void()> poll) { (void)poll; }
  // Extra checks a debugging run asks of every launch from now on: reads of VMEM never written
  // are errors. A device that cannot check ignores it.
  virtual void set_debug_checks(bool on) { (void)on; }
  // Timing only (SimOptions::timing_only): launches from now on are timed without computing
  // values, and copies move no bytes (copies to the host give zeros), so tensors of any size cost
  // no host memory. Returns false for a device that cannot (it then computes as before).
  virtual bool set_timing_only(bool on) { return !on; }
  virtual bool timing_only() const { return false; }
};

// The simulator behind the interface, for code above the seam that must not name SimDevice.
std::unique_ptr<Device> make_sim_device(ChipConfig chip);

// A slice of chips joined by ICI links, behind the same seam: one program launched on every chip
// at once (sim/slice_launch.h), as collective kernels are. Its chips' memories are its own.
class SliceDevice {
 public:
  virtual ~SliceDevice() = default;
  virtual const ChipConfig& chip() const = 0;
  virtual int chips() const = 0;
  virtual HbmAddress allocate(int chip, uint64_t bytes) = 0;  // throws OutOfMemoryError
  virtual void free(int chip, HbmAddress address) = 0;
  // args[c]: chip c's arguments. Returns once every chip has finished; throws SimError.
  virtual SliceLaunchResult launch(const isa::Program& program, std::span<const std::vector<KernelArg>> args) = 0;
};

// A simulated slice of `axes` chips of `chip` (wraparound as sim::Slice decides).
std::unique_ptr<SliceDevice> make_sim_slice(ChipConfig chip, std::vector<int> axes);

}  // namespace vtpu::sim
