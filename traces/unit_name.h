// Names of a chip's units ("v5e core0 mxu1 weights") as views that live as long as the process.
// Every launch reports every unit of every core it ran; a std::string per unit per launch cost an
// eager op a heap block each (and a merge by string after), while the set of distinct names is
// small and fixed by the chip presets in use.
#pragma once

#include <string_view>

namespace vtpu::traces {

// The one stored copy of `name`, made on first use; safe from several threads.
std::string_view unit_name(std::string_view name);

}  // namespace vtpu::traces
