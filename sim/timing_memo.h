// Timing only: a data-independent program (sim/data_dependence.h) takes the same time at every
// launch with the same arguments, so its result is remembered per launch. The key is what the
// timing model can see of a launch: the TensorCores it runs on, each scalar argument's value, and
// each buffer's size and memory (HBM or held VMEM); buffer addresses are not in it, since kernels
// see buffers through a window laid out from their sizes alone (sim/arg_window.h). The memo is
// exact, not an estimate: tests/sim/test_timing_only.cc compares it with full runs.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <vector>

#include "sim/hbm.h"
#include "sim/launch.h"

namespace vtpu::sim {

class TimingMemo {
 public:
  using Key = std::vector<int64_t>;
  static Key key(int cores, std::span<const KernelArg> args, const Hbm* held);

  std::optional<LaunchResult> find(const Key& key) const;
  void remember(Key key, const LaunchResult& result);

 private:
  // A program launched with ever new scalars (a loop counter as an argument) must not grow
  // without bound: past this many entries the memo starts again.
  static constexpr size_t kMaxEntries = 1024;
  std::map<Key, LaunchResult> results_;
};

}  // namespace vtpu::sim
