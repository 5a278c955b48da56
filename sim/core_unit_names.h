// The names of one core's units, in the timing model's track order: "scalar", "vpu0", ..., "hbm",
// each with its full name ("v5e core0 mxu1 weights") as reported in a launch's unit usage. They
// depend only on the chip's unit counts and the core's index, so they are made once per
// (chip, core) and shared by every launch: formatting them afresh cost an eager op some thirty
// string formats, about 4% of its host time.
#pragma once

#include <string_view>
#include <vector>

#include "sim/chip_config.h"

namespace vtpu::sim {

struct UnitNames {
  std::string_view unit;       // "mxu1 weights"
  std::string_view full_name;  // "v5e core0 mxu1 weights"
};

struct CoreUnitNames {
  std::string_view process;  // "v5e core0": the trace's process of this core
  int vpu_first = 0, mxu_first = 0, dma_first = 0;  // where each family starts in `units`
  int scalar = 0, transcendental = 0, cross_lane = 0, vector_load = 0, vector_store = 0, hbm = 0;
  std::vector<UnitNames> units;  // the tracks in order; mxu i's weights follow mxu i
};

// Views that live as long as the process; safe from several threads.
const CoreUnitNames& core_unit_names(const ChipConfig& chip, int core_index);

}  // namespace vtpu::sim
