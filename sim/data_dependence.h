// Which values of a program come from the data it moves, and whether its timing can depend on
// them. Timing follows control flow, the addresses and sizes of accesses and the regions they
// touch; these come from scalar registers and from the masks of loads and stores. Data enters
// vector registers through loads and MXU pops and flows on through vector instructions (taint per
// register and program point, over every path); it enters scalar registers only through `sld`.
// A program is data-independent when it has no `sld` and no load or store under a tainted mask.
// Such a program's time is a function of its launch (sim/timing_memo.h). A timing-only run still
// computes every vector instruction whose destinations are untainted (lane indices, masks from
// counts): their values are exact.
#pragma once

#include <cstdint>
#include <vector>

#include "isa/instruction.h"

namespace vtpu::sim {

struct DataFlow {
  // Conservative: true for some programs whose timing could not really change (an `sld` of a
  // constant), never false for one whose timing could.
  bool depends_on_data = false;
  // Per instruction: it writes vector or mask registers that never hold data, so a timing-only
  // run must compute it.
  std::vector<uint8_t> computes_untainted;
};

// `group_regs`: the vector registers of an MXU row group on the chip (mxu_dim / 128).
DataFlow analyse_data_flow(const std::vector<isa::Instruction>& code, int group_regs);

// The comparisons: the instructions whose mask depends on vector values.
bool is_comparison(isa::Opcode opcode);

}  // namespace vtpu::sim
