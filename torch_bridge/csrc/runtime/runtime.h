// Note: torch ships its own fmt headers, which shadow the system fmt inside torch builds, so
// the bridge's torch-facing files format messages with c10::str, never fmt.
//
// The process-wide state behind device "tpu": the simulated chips (through sim::Device only),
// the table of device buffers, the execution mode and the counters vtpu.stats() reports.
//
// Buffers have virtual addresses: a tensor's storage pointer is a virtual address that is never
// dereferenced on the host. HBM backs a buffer only once it must hold data (strict mode: at
// allocation; defer_and_fuse: when a flush writes it or a host copy fills it), which is how
// intermediates that die before a flush never get HBM.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/graph/plan.h"
#include "kernels/graph/plan_cache.h"
#include "sim/device.h"
#include "sim/interconnect.h"
#include "torch_bridge/plan_runner/plan_runner.h"
#include "traces/trace_recorder.h"

namespace vtpu::bridge {

// Debug runs every op at once like StrictEager; the Python side checks each op
// (vtpu/debug_mode.py) and user kernels check their VMEM reads (record/assembly_kernel.cc).
enum class Mode : uint8_t { StrictEager, DeferAndFuse, Debug };
Mode mode_from_name(const std::string& name);  // throws std::invalid_argument listing the modes
std::string mode_name(Mode mode);

struct Buffer {
  int device = 0;
  uint64_t bytes = 0;
  std::optional<sim::HbmAddress> hbm;  // backing HBM, once materialised
  int pending_value = -1;              // value of the device's pending graph that will fill it
  // Every int64 element it holds has |value| <= this; unknown (nullopt) after any write that does
  // not say. int64 ops run on the chip only on operands with a known bound (ops_int64.h).
  std::optional<int64_t> int64_bound;
  // Simulated time at which its data arrives over the interconnect (a collective's result, written
  // while the chip went on computing); whatever reads it first waits for that (0: already here).
  double ready_at = 0;
  // Non-empty: its value was lost when the flush that was to write it failed (why); reading it
  // raises until a whole new value is written.
  std::string lost;
};

// Raises RuntimeError when the buffer's value was lost to a failed flush.
void check_not_lost(const Buffer& b);

struct Stats {
  uint64_t kernels_launched = 0;
  uint64_t simulated_cycles = 0;
  double simulated_seconds = 0;
  uint64_t hbm_read_bytes = 0;
  uint64_t hbm_write_bytes = 0;
  uint64_t held_vmem_bytes = 0;       // DMA traffic to and from intermediates held in VMEM
  uint64_t intermediates_held = 0;    // a flush's intermediates that lived in held VMEM, not HBM
  uint64_t intermediates_in_hbm = 0;  // those that did not fit there
  uint64_t host_to_device_bytes = 0;
  uint64_t device_to_host_bytes = 0;
  uint64_t ops_recorded = 0;        // aten ops lowered into graphs
  uint64_t ops_fused_away = 0;      // ops that ran inside another op's kernel
  uint64_t ops_dead = 0;            // recorded ops whose results nobody kept (never ran)
  uint64_t flushes = 0;
  uint64_t host_relayouts = 0;      // non-contiguous views made dense through the host
  uint64_t chip_to_chip_bytes = 0;  // tensors copied between this process's chips, over ICI
  double chip_to_chip_seconds = 0;  // the interconnect's time for them
  double interconnect_wait_seconds = 0;  // simulated time chips stalled for data still in flight
  uint64_t cpu_fallback_ops = 0;
  uint64_t plan_cache_hits = 0;     // flushes whose graph was planned before
  uint64_t plan_cache_misses = 0;
  double planning_seconds = 0;      // host time making plans (fusion, memory plan, kernel generation)
  uint64_t timing_memo_hits = 0;    // timing-only launches answered by the timing memo (sim/timing_memo.h)
  // Timing only: launches whose control flow or addresses may have depended on values, which the
  // run did not compute (their time is an estimate from placeholders), by kernel label.
  std::map<std::string, uint64_t> timing_only_data_dependent;
  std::map<std::string, uint64_t> fallback_counts;
  // Summed over launches, for vtpu.stats()["unit_utilisation"]; keyed by traces::unit_name().
  std::map<std::string_view, uint64_t> busy_cycles_per_unit;
  std::map<std::string, KernelProfile> per_kernel;  // by fused label, summed over flushes
};

// What the runtime asks of the recorder, which registers these when the extension loads (the
// runtime never includes the recorder: the recorder depends on the runtime, not the reverse).
// `flush` runs a device's pending graph; `forget_output` drops a pending result whose buffer is
// being released.
struct PendingWorkHooks {
  std::function<void(int device)> flush;
  std::function<void(int device, uint64_t vaddr)> forget_output;
};

class Runtime {
 public:
  static Runtime& get();
  // Called once, from the recorder's static initialisation; needs no Runtime (nothing is built).
  static void set_pending_work_hooks(PendingWorkHooks hooks);

  int device_count() const { return static_cast<int>(devices_.size()); }
  sim::Device& device(int index);
  const std::string& chip_name() const { return chip_name_; }

  Mode mode() const { return mode_; }
  bool runs_each_op_at_once() const { return mode_ != Mode::DeferAndFuse; }
  void set_mode(Mode mode);
  kernels::FusionStrategy fusion() const { return fusion_; }
  void set_fusion(kernels::FusionStrategy s) { fusion_ = s; }
  kernels::ProgramCache& cache() { return cache_; }
  kernels::PlanCache& plans() { return plans_; }
  // Timing only (sim::Device::set_timing_only): kernels are generated, planned and timed, values
  // are not computed and tensors hold no host bytes. Pending work runs before the switch.
  bool timing_only() const { return timing_only_; }
  void set_timing_only(bool on);
  bool cpu_fallback_allowed() const { return cpu_fallback_; }
  void set_cpu_fallback(bool allowed) { cpu_fallback_ = allowed; }
  std::string matmul_precision() const;  // torch.get_float32_matmul_precision()

  // Virtual memory. allocate() backs the buffer with HBM at once in strict mode. In every mode
  // the bytes of all live buffers (backed or not yet) must fit the device's HBM: a tensor that
  // cannot coexist with the live ones is refused at the op that asked (torch.OutOfMemoryError),
  // not at a later flush where no op can be named.
  uint64_t allocate(int device, uint64_t bytes);
  void release(uint64_t vaddr);
  Buffer& buffer(uint64_t vaddr);
  const Buffer* find_buffer(uint64_t vaddr) const;  // nullptr when none
  // HBM of the buffer, allocated now if it has none (raises torch.OutOfMemoryError when full).
  sim::HbmAddress materialize(uint64_t vaddr);

  Stats& stats() { return stats_; }
  void reset_stats() { stats_ = Stats{}; }
  // Each device's simulated time since the process began (launches back to back), which
  // reset_stats leaves alone: what tpu events read, so elapsed_time is simulated time.
  double simulated_clock(int device) const { return clocks_.at(device); }
  void advance_clock(int device, double seconds) { clocks_.at(device) += seconds; }
  // Charges a copy of `bytes` from chip `src` to chip `dst` to both clocks and the counters.
  void copy_between_chips(int src, int dst, uint64_t bytes);
  // The device's clock moves to `seconds` if it is behind (it waits for data in flight).
  void wait_until(int device, double seconds);
  std::recursive_mutex& mutex() { return mutex_; }

  // Tracing: launches on every device are recorded until stop_trace writes the file.
  void start_trace();
  void stop_trace(const std::string& path);
  // While tracing: the device's next launches are drawn from its simulated clock (waits for data
  // in flight included) on its own chip's rows ("tpu:N ..."); called as a flush starts.
  void anchor_trace(int device);
  // While tracing: `name` on the device's interconnect row (or on the row `row` beside it, one per
  // link) from `start` to `end` (simulated seconds).
  void trace_interconnect(int device, const std::string& name, double start, double end,
                          const std::string& row = "interconnect");
  bool tracing() const { return trace_ != nullptr; }

  // Progress of long flushes (vtpu.progress): the listener hears (launches run, launches in the
  // flush) at most every kProgressSeconds of host time, and once more when a flush it heard of
  // ends, so short flushes cost nothing and show nothing.
  using ProgressListener = std::function<void(size_t done, size_t total)>;
  static constexpr double kProgressSeconds = 0.25;
  void set_progress_listener(ProgressListener listener) { progress_ = std::move(listener); }
  // The PlanExecution after_launch hook for a flush of `total` launches; nullptr when no one listens.
  std::function<void(size_t)> progress_for(size_t total) const;

 private:
  Runtime();
  std::vector<std::unique_ptr<sim::Device>> devices_;
  std::vector<double> clocks_;
  std::unique_ptr<sim::Slice> slice_;  // this process's chips, joined by ICI (VTPU_TOPOLOGY, or one axis)
  std::string chip_name_;
  Mode mode_ = Mode::DeferAndFuse;
  kernels::FusionStrategy fusion_ = kernels::FusionStrategy::Greedy;
  kernels::ProgramCache cache_;
  kernels::PlanCache plans_;
  bool cpu_fallback_ = false;
  bool timing_only_ = false;
  std::map<uint64_t, Buffer> buffers_;
  std::vector<uint64_t> live_bytes_;  // per device: the bytes of its live buffers
  uint64_t next_vaddr_ = uint64_t{1} << 44;
  Stats stats_;
  std::unique_ptr<traces::TraceRecorder> trace_;
  ProgressListener progress_;
  std::recursive_mutex mutex_;
};

}  // namespace vtpu::bridge
