// Whether a program's timing can depend on the data it moves. Timing follows control flow, the
// addresses and sizes of accesses and the regions they touch; all of these come from the scalar
// unit and the masks. A program is data-independent when nothing moves data into them: no `sld`
// (the only way VMEM data reaches a scalar register), and no vector load or store under a mask
// computed by a comparison. Such a program's time is a function of its launch (sim/timing_memo.h);
// a timing-only run of any other one computes its time from placeholder values.
#pragma once

#include <vector>

#include "isa/instruction.h"

namespace vtpu::sim {

// The comparisons: the instructions whose mask depends on vector data.
bool is_comparison(isa::Opcode opcode);

// Conservative: true for some programs whose timing could not really change (an `sld` of a
// constant), never false for one whose timing could.
bool timing_depends_on_data(const std::vector<isa::Instruction>& code);

}  // namespace vtpu::sim
