// ChipConfig: every number the model uses about one TPU generation, loaded from a JSON preset
// (sim/presets/*.json, each value with its public source) or a user file. Strict: unknown or
// missing fields, wrong types and inconsistent values are errors.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "isa/verifier.h"

namespace vtpu::sim {

// X(type, name): one line per JSON field, expanded into the struct, the loader and the dumper.
#define VTPU_CHIP_FIELDS(X)                   \
  X(double, clock_hz)                         \
  X(int, tensor_cores)                        \
  X(int, mxu_per_core)                        \
  X(int, mxu_dim)                             \
  X(int, mxu_acc_slots)                       \
  X(int, mxu_fill_cycles)                     \
  X(int, mxu_weight_load_cycles)              \
  X(int, mxu_push_cycles)                     \
  X(int, mxu_pop_cycles)                      \
  X(uint64_t, vmem_bytes)                     \
  X(uint64_t, vmem_held_bytes)                \
  X(double, vmem_bandwidth_ratio)             \
  X(int, local_dma_latency_cycles)            \
  X(uint64_t, hbm_bytes)                      \
  X(double, hbm_bandwidth_bytes_per_s)        \
  X(double, hbm_efficiency)                   \
  X(double, hbm_latency_ns)                   \
  X(int, dma_queues)                          \
  X(int, semaphores)                          \
  X(int, ici_links)                           \
  X(double, ici_link_bandwidth_bytes_per_s)   \
  X(double, ici_hop_latency_ns)               \
  X(double, peak_bf16_flops)                  \
  X(int, issue_width)                         \
  X(int, unit_queue_depth)                    \
  X(int, branch_taken_penalty_cycles)         \
  X(int, vpu_alus)                            \
  X(int, vpu_latency_cycles)                  \
  X(int, transc_issue_cycles)                 \
  X(int, transc_latency_cycles)               \
  X(int, xlane_issue_cycles)                  \
  X(int, xlane_latency_cycles)                \
  X(int, vld_latency_cycles)                  \
  X(int, vst_latency_cycles)

struct ChipConfig {
  std::string name;
  std::string description;
#define VTPU_DECLARE_FIELD(type, field) type field{};
  VTPU_CHIP_FIELDS(VTPU_DECLARE_FIELD)
#undef VTPU_DECLARE_FIELD

  // Derived quantities (units in the names).
  // HBM as DMAs see it: streams move at hbm_efficiency of the published peak (refresh, bank and
  // read/write turnarounds are not modelled one by one). Bounds and DMA timing use this rate.
  double sustained_hbm_bytes_per_s() const { return hbm_bandwidth_bytes_per_s * hbm_efficiency; }
  double hbm_bytes_per_cycle() const { return sustained_hbm_bytes_per_s() / clock_hz; }
  double hbm_latency_cycles() const { return hbm_latency_ns * 1e-9 * clock_hz; }
  // VMEM is split: kernels tile in kernel_vmem_bytes; the rest (vmem_held_bytes) holds a flush's
  // intermediates between its kernels, reached by local DMAs at local_dma_bytes_per_cycle.
  uint64_t kernel_vmem_bytes() const { return vmem_bytes - vmem_held_bytes; }
  double local_dma_bytes_per_cycle() const { return hbm_bandwidth_bytes_per_s / clock_hz * vmem_bandwidth_ratio; }
  // MXU peak: each MXU retires mxu_dim^2 MACs per cycle (8 LHS rows every mxu_push_cycles = 8).
  double model_peak_flops(int cores) const {
    return 2.0 * cores * mxu_per_core * double(mxu_dim) * mxu_dim * (8.0 / mxu_push_cycles) * clock_hz;
  }
  double cycles_to_seconds(double cycles) const { return cycles / clock_hz; }
  isa::TargetLimits target_limits() const;
};

class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Loads a preset by name ("v5e"), or a JSON file when the argument contains '/' or ends in ".json".
ChipConfig load_chip(const std::string& name_or_path);
ChipConfig parse_chip_json(const std::string& json_text, const std::string& origin);
std::vector<std::string> preset_names();
std::string preset_json(const std::string& name);

}  // namespace vtpu::sim
