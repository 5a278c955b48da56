// One TensorCore running a program, an instruction at a time: its functional state, DMAs and
// semaphores, and timing model together. A single-chip launch runs each core to its end; a slice
// launch interleaves the cores of all its chips, since a semaphore may be signalled from another chip.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "isa/program.h"
#include "sim/arg_window.h"
#include "sim/chip_config.h"
#include "sim/core_state.h"
#include "sim/dma_tracker.h"
#include "sim/launch.h"
#include "sim/prepared_program.h"
#include "sim/semantics.h"
#include "sim/slice_peers.h"
#include "sim/timing_model.h"
#include "sim/vmem_pool.h"
#include "traces/summary.h"
#include "traces/trace_recorder.h"

namespace vtpu::sim {

struct CoreRun {
  uint64_t cycles = 0;
  uint64_t instructions = 0;
  double macs = 0;
  uint64_t hbm_read = 0, hbm_write = 0, held = 0, ici = 0;
  std::vector<traces::UnitUsage> units;
};

// Where a core placed in a launch: its TensorCore among `cores`, and its chip among `chips` of a
// slice launch (peers: the others, or nullptr).
struct CorePlace {
  int core_index = 0, cores = 1;
  int chip_index = 0, chips = 1;
  SlicePeers* peers = nullptr;
};

class CoreRunner {
 public:
  enum class Step { Ran, Blocked, Halted };

  CoreRunner(const isa::Program& program, const PreparedProgram& prepared, const ArgWindow& window,
             const std::vector<int32_t>& arg_values, const ChipConfig& chip, const SimOptions& options, CorePlace place,
             double hbm_share, traces::TraceRecorder* trace, VmemPool* vmem_pool);

  // Runs the next instruction. Blocked: it is a sem.wait whose signals have not all been sent yet
  // (nothing ran; another chip may still send them). Halted: the program has ended.
  Step step();
  // Runs to the end; a wait that nothing can satisfy is a deadlock (SimError).
  void run_to_end();
  // The cycle the next instruction would issue at (slice launches step the earliest core first).
  uint64_t issue_cycle() const { return timing_.issue_cycle(); }
  bool halted() const { return halted_; }
  DmaTracker& dmas() { return dmas_; }
  // Throws the deadlock SimError for the wait this core is blocked on.
  [[noreturn]] void fail_deadlocked() const;
  // The summary of the run; gives the core's VMEM back to the pool.
  CoreRun finish();

 private:
  const std::vector<isa::Instruction>& code_;
  const SimOptions& options_;
  VmemPool* vmem_pool_;
  SlicePeers* peers_;
  CoreState core_;
  DmaTracker dmas_;
  Semantics semantics_;
  TimingModel timing_;
  CoreRun run_;
  size_t pc_ = 0;
  bool halted_ = false;
  std::chrono::steady_clock::time_point last_poll_;
};

}  // namespace vtpu::sim
