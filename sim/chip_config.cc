// Strict JSON loading of chip presets. Presets are compiled into the library (presets_embedded.cc,
// generated from sim/presets/*.json) so the Python extension needs no data files at run time.
#include "sim/chip_config.h"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "sim/presets_embedded.h"

namespace vtpu::sim {
namespace {

using nlohmann::json;

template <typename T>
T read_number(const json& entry, const std::string& field, const std::string& origin) {
  if (!entry.is_object() || !entry.contains("value") || !entry.contains("source")) {
    throw ConfigError(fmt::format("{}: field '{}' must be an object {{\"value\": ..., \"source\": \"...\"}}", origin, field));
  }
  for (const auto& [key, _] : entry.items()) {
    if (key != "value" && key != "source") {
      throw ConfigError(fmt::format("{}: field '{}' has unknown key '{}'", origin, field, key));
    }
  }
  if (!entry["source"].is_string() || entry["source"].get<std::string>().empty()) {
    throw ConfigError(fmt::format("{}: field '{}' needs a non-empty source", origin, field));
  }
  const json& v = entry["value"];
  if (!v.is_number()) throw ConfigError(fmt::format("{}: field '{}' must be a number", origin, field));
  const double d = v.get<double>();
  if (!(d > 0) || !std::isfinite(d)) {
    throw ConfigError(fmt::format("{}: field '{}' must be positive, got {}", origin, field, d));
  }
  if constexpr (std::is_integral_v<T>) {
    if (d != std::floor(d)) throw ConfigError(fmt::format("{}: field '{}' must be an integer, got {}", origin, field, d));
    if (d > 1e19) throw ConfigError(fmt::format("{}: field '{}' too large", origin, field));
    if constexpr (sizeof(T) == sizeof(int)) {
      if (d > 1e9) throw ConfigError(fmt::format("{}: field '{}' too large", origin, field));
    }
    return static_cast<T>(d);
  } else {
    return d;
  }
}

void check_consistency(const ChipConfig& c, const std::string& origin) {
  if (c.mxu_dim % 128 != 0) throw ConfigError(fmt::format("{}: mxu_dim must be a multiple of 128 (the lane count)", origin));
  if (c.mxu_per_core > 8) throw ConfigError(fmt::format("{}: at most 8 MXUs per core (3-bit field)", origin));
  if (c.dma_queues > 4) throw ConfigError(fmt::format("{}: at most 4 DMA queues (2-bit field)", origin));
  if (c.semaphores > 32) throw ConfigError(fmt::format("{}: at most 32 semaphores (5-bit field)", origin));
  if (c.mxu_acc_slots > 256) throw ConfigError(fmt::format("{}: at most 256 accumulator slots (8-bit field)", origin));
  if (c.hbm_efficiency > 1) throw ConfigError(fmt::format("{}: hbm_efficiency is a fraction of the peak, at most 1", origin));
  if (c.vmem_bytes > (uint64_t{1} << 31)) throw ConfigError(fmt::format("{}: VMEM larger than 2 GiB is not addressable", origin));
  if (c.vmem_held_bytes > c.vmem_bytes / 2) {
    throw ConfigError(fmt::format("{}: vmem_held_bytes ({}) may be at most half of vmem_bytes ({}): kernels tile in the rest",
                                  origin, c.vmem_held_bytes, c.vmem_bytes));
  }
  const double model = c.model_peak_flops(c.tensor_cores);
  if (std::fabs(model - c.peak_bf16_flops) > 0.02 * c.peak_bf16_flops) {
    throw ConfigError(fmt::format(
        "{}: cores x MXUs x 2 x mxu_dim^2 x clock = {:.4g} FLOP/s does not reproduce the published peak {:.4g} (2% tolerance)",
        origin, model, c.peak_bf16_flops));
  }
}

}  // namespace

isa::TargetLimits ChipConfig::target_limits() const {
  return {kernel_vmem_bytes(), mxu_per_core, mxu_dim, mxu_acc_slots, dma_queues, semaphores};
}

ChipConfig parse_chip_json(const std::string& json_text, const std::string& origin) {
  json doc;
  try {
    doc = json::parse(json_text);
  } catch (const json::exception& e) {  // a syntax error, or a number too large for any type
    throw ConfigError(fmt::format("{}: invalid JSON: {}", origin, e.what()));
  }
  if (!doc.is_object()) throw ConfigError(fmt::format("{}: top level must be an object", origin));
  ChipConfig c;
  std::set<std::string> known = {"name", "description"};
#define VTPU_KNOW_FIELD(type, field) known.insert(#field);
  VTPU_CHIP_FIELDS(VTPU_KNOW_FIELD)
#undef VTPU_KNOW_FIELD
  for (const auto& [key, _] : doc.items()) {
    if (!known.count(key)) throw ConfigError(fmt::format("{}: unknown field '{}'", origin, key));
  }
  if (!doc.contains("name") || !doc["name"].is_string()) throw ConfigError(fmt::format("{}: missing string field 'name'", origin));
  c.name = doc["name"].get<std::string>();
  if (doc.contains("description") && doc["description"].is_string()) c.description = doc["description"].get<std::string>();
#define VTPU_READ_FIELD(type, field)                                                          \
  if (!doc.contains(#field)) throw ConfigError(fmt::format("{}: missing field '{}'", origin, #field)); \
  c.field = read_number<type>(doc[#field], #field, origin);
  VTPU_CHIP_FIELDS(VTPU_READ_FIELD)
#undef VTPU_READ_FIELD
  check_consistency(c, origin);
  return c;
}

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const auto& preset : embedded_presets()) names.emplace_back(preset.name);
  return names;
}

std::string preset_json(const std::string& name) {
  for (const auto& preset : embedded_presets()) {
    if (preset.name == name) return std::string(preset.json);
  }
  throw ConfigError(fmt::format("unknown chip '{}' (presets: {})", name, fmt::join(preset_names(), ", ")));
}

ChipConfig load_chip(const std::string& name_or_path) {
  const bool is_path = name_or_path.find('/') != std::string::npos ||
                       (name_or_path.size() > 5 && name_or_path.ends_with(".json"));
  if (!is_path) return parse_chip_json(preset_json(name_or_path), name_or_path + " preset");
  std::ifstream in(name_or_path);
  if (!in) throw ConfigError(fmt::format("cannot read chip config '{}'", name_or_path));
  std::stringstream text;
  text << in.rdbuf();
  return parse_chip_json(text.str(), name_or_path);
}

}  // namespace vtpu::sim
