// The chip presets, compiled in from sim/presets/*.json by scripts/embed_presets.py.
#pragma once

#include <span>
#include <string_view>

namespace vtpu::sim {

struct EmbeddedPreset {
  std::string_view name;
  std::string_view json;
};

std::span<const EmbeddedPreset> embedded_presets();

}  // namespace vtpu::sim
