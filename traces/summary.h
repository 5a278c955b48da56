// The numbers a run is judged by: per-unit utilisation, HBM bytes, achieved FLOP/s against peak,
// and the roofline bound (max of compute time at peak and bytes at full HBM bandwidth) against
// the simulated time. Rendered as text for people and JSON for scripts.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace vtpu::traces {

struct UnitUsage {
  std::string_view name;  // from unit_name() (traces/unit_name.h): valid for the process's life
  uint64_t busy_cycles = 0;
  uint64_t instructions = 0;
};

struct RunSummary {
  std::string chip;
  double clock_hz = 0;
  uint64_t cycles = 0;
  uint64_t instructions = 0;
  std::vector<UnitUsage> units;
  uint64_t hbm_read_bytes = 0;
  uint64_t hbm_write_bytes = 0;
  uint64_t held_vmem_bytes = 0;  // DMA traffic to and from VMEM held across launches (on chip, not HBM)
  uint64_t ici_bytes = 0;        // sent to other chips of a slice launch (dma.remote)
  double flops = 0;            // MXU multiply-adds x 2, as executed
  double peak_flops = 0;       // of the cores that ran
  double hbm_bandwidth_bytes_per_s = 0;

  double seconds() const { return cycles / clock_hz; }
  double compute_bound_seconds() const { return peak_flops > 0 ? flops / peak_flops : 0; }
  double memory_bound_seconds() const {
    return hbm_bandwidth_bytes_per_s > 0 ? double(hbm_read_bytes + hbm_write_bytes) / hbm_bandwidth_bytes_per_s : 0;
  }
  double roofline_seconds() const { return std::max(compute_bound_seconds(), memory_bound_seconds()); }
  double achieved_flops() const { return seconds() > 0 ? flops / seconds() : 0; }
};

std::string render_text(const RunSummary& summary);
nlohmann::json to_json(const RunSummary& summary);

}  // namespace vtpu::traces
