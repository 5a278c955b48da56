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
};

struct LaunchResult {
  uint64_t cycles = 0;
  traces::RunSummary summary;
};

}  // namespace vtpu::sim
