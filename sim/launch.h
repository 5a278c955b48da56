// What a launch takes (arguments, options) and gives back (cycles, per-unit counters, summary).
// Shared by the executor and the Device interface.
#pragma once

#include <functional>

#include <cstdint>
#include <string>
#include <vector>

#include "sim/hbm_address.h"
#include "traces/summary.h"

namespace vtpu::sim {

struct KernelArg {
  enum class Kind { Buffer, Scalar } kind = Kind::Scalar;
  HbmAddress address = 0;  // Buffer: device HBM address
  uint64_t bytes = 0;      // Buffer: the range the kernel may touch
  int32_t scalar = 0;      // Scalar

  static KernelArg buffer(HbmAddress address, uint64_t bytes) { return {Kind::Buffer, address, bytes, 0}; }
  static KernelArg value(int32_t v) { return {Kind::Scalar, 0, 0, v}; }
};

struct SimOptions {
  bool check_uninitialized = false;  // error on reading VMEM that was never written
  // Called every few milliseconds of host time while a launch runs; it may throw to abandon the
  // launch (the PyTorch bridge raises KeyboardInterrupt there when Ctrl-C was pressed).
  std::function<void()> poll;
  uint64_t max_instructions = 2'000'000'000;  // guards against runaway loops
  // TensorCores that run the program (each gets its own VMEM and an even share of the HBM
  // bandwidth among the cores that move data: sim/core_activity.h).
  // 0: every TensorCore of the chip for a .multicore program, one for any other.
  int cores = 0;
  // Timing only: the functional units are skipped (vector and MXU arithmetic, the bytes of loads,
  // stores and DMAs) while the scalar unit, every address and bounds check and the timing model
  // run as usual, so a launch costs the host a fraction of a full one and touches no HBM bytes.
  // Values a kernel reads back into its scalar unit (sld) are then placeholders: see
  // LaunchResult::depends_on_data.
  bool timing_only = false;
};

struct LaunchResult {
  uint64_t cycles = 0;
  traces::RunSummary summary;
  // The program's control flow, addresses or touched regions may depend on the data it moves
  // (sim/data_dependence.h): in a timing-only run its time was computed from placeholder values.
  bool depends_on_data = false;
  bool memo_hit = false;  // timing only: the result came from the timing memo (sim/timing_memo.h)
};

}  // namespace vtpu::sim
