#include "traces/summary.h"

#include <fmt/format.h>

namespace vtpu::traces {

std::string render_text(const RunSummary& s) {
  std::string out;
  out += fmt::format("chip {}: {} cycles = {:.3f} us simulated, {} instructions\n", s.chip, s.cycles,
                     s.seconds() * 1e6, s.instructions);
  out += "  unit                  busy cycles   util   instructions\n";
  for (const auto& u : s.units) {
    if (u.instructions == 0) continue;
    out += fmt::format("  {:<20} {:>12} {:>5.1f}%   {:>12}\n", u.name, u.busy_cycles,
                       s.cycles ? 100.0 * u.busy_cycles / s.cycles : 0.0, u.instructions);
  }
  out += fmt::format("  HBM: {} bytes read, {} bytes written ({:.1f}% of peak bandwidth)\n", s.hbm_read_bytes,
                     s.hbm_write_bytes, s.seconds() > 0 ? 100.0 * s.memory_bound_seconds() / s.seconds() : 0.0);
  if (s.held_vmem_bytes) out += fmt::format("  held VMEM: {} bytes moved on chip\n", s.held_vmem_bytes);
  if (s.ici_bytes) out += fmt::format("  ICI: {} bytes sent to other chips\n", s.ici_bytes);
  out += fmt::format("  MXU: {:.4g} FLOP, {:.4g} FLOP/s achieved = {:.1f}% of peak {:.4g}\n", s.flops,
                     s.achieved_flops(), s.peak_flops > 0 ? 100.0 * s.achieved_flops() / s.peak_flops : 0.0,
                     s.peak_flops);
  out += fmt::format("  roofline bound {:.3f} us ({}-bound); simulated / bound = {:.3f}\n", s.roofline_seconds() * 1e6,
                     s.compute_bound_seconds() >= s.memory_bound_seconds() ? "compute" : "memory",
                     s.roofline_seconds() > 0 ? s.seconds() / s.roofline_seconds() : 0.0);
  return out;
}

nlohmann::json to_json(const RunSummary& s) {
  nlohmann::json units = nlohmann::json::array();
  for (const auto& u : s.units) {
    units.push_back({{"name", std::string(u.name)}, {"busy_cycles", u.busy_cycles}, {"instructions", u.instructions},
                     {"utilization", s.cycles ? double(u.busy_cycles) / s.cycles : 0.0}});
  }
  return {{"chip", s.chip},
          {"clock_hz", s.clock_hz},
          {"cycles", s.cycles},
          {"seconds", s.seconds()},
          {"instructions", s.instructions},
          {"units", units},
          {"hbm_read_bytes", s.hbm_read_bytes},
          {"hbm_write_bytes", s.hbm_write_bytes},
          {"held_vmem_bytes", s.held_vmem_bytes},
          {"ici_bytes", s.ici_bytes},
          {"flops", s.flops},
          {"peak_flops", s.peak_flops},
          {"achieved_flops", s.achieved_flops()},
          {"compute_bound_seconds", s.compute_bound_seconds()},
          {"memory_bound_seconds", s.memory_bound_seconds()},
          {"roofline_seconds", s.roofline_seconds()}};
}

}  // namespace vtpu::traces
