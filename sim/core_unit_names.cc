#include "sim/core_unit_names.h"

#include <fmt/format.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>

#include "traces/unit_name.h"

namespace vtpu::sim {
namespace {

CoreUnitNames make_names(const ChipConfig& chip, int core_index) {
  CoreUnitNames names;
  const std::string process = fmt::format("{} core{}", chip.name, core_index);
  names.process = traces::unit_name(process);
  const auto add = [&](const std::string& unit) {
    names.units.push_back({traces::unit_name(unit), traces::unit_name(fmt::format("{} {}", process, unit))});
    return static_cast<int>(names.units.size()) - 1;
  };
  names.scalar = add("scalar");
  names.vpu_first = static_cast<int>(names.units.size());
  for (int i = 0; i < chip.vpu_alus; ++i) add(fmt::format("vpu{}", i));
  names.transcendental = add("transcendental");
  names.cross_lane = add("cross-lane");
  names.vector_load = add("vector-load");
  names.vector_store = add("vector-store");
  names.mxu_first = static_cast<int>(names.units.size());
  for (int i = 0; i < chip.mxu_per_core; ++i) {
    add(fmt::format("mxu{}", i));
    add(fmt::format("mxu{} weights", i));
  }
  names.dma_first = static_cast<int>(names.units.size());
  for (int i = 0; i < chip.dma_queues; ++i) add(fmt::format("dma{}", i));
  names.hbm = add("hbm");
  return names;
}

}  // namespace

const CoreUnitNames& core_unit_names(const ChipConfig& chip, int core_index) {
  // Keyed by everything the names are made from: a what-if chip may keep a preset's name and
  // change its unit counts.
  using Key = std::tuple<std::string, int, int, int, int>;
  static std::mutex mutex;
  static std::map<Key, std::unique_ptr<const CoreUnitNames>> made;
  std::lock_guard lock(mutex);
  auto& entry = made[Key{chip.name, core_index, chip.vpu_alus, chip.mxu_per_core, chip.dma_queues}];
  if (!entry) entry = std::make_unique<const CoreUnitNames>(make_names(chip, core_index));
  return *entry;
}

}  // namespace vtpu::sim
