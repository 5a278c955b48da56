#include "sim/core_activity.h"

#include "isa/instruction_info.h"
#include "sim/core_state.h"
#include "sim/dma_tracker.h"
#include "sim/semantics.h"

namespace vtpu::sim {

namespace {
// Prologues that compute a share take tens of steps; a core that steps this far without a DMA
// is doing vector work of its own and is simply run.
constexpr int kProbeSteps = 1 << 16;
}  // namespace

bool core_moves_data(const std::vector<isa::Instruction>& code, const std::vector<int32_t>& arg_values,
                     const ChipConfig& chip, const SimOptions& options, int core_index, int cores) {
  // The scalar instructions stepped here touch registers and argument slots only: a 4-byte VMEM
  // and no MXUs suffice, and the real run starts again from a fresh state.
  CoreState probe(4, 0, chip.mxu_dim, 0, false);
  probe.core_index = core_index;
  probe.core_count = cores;
  ArgWindow no_window;
  DmaTracker dmas(chip.semaphores);
  const DataFlow unused;  // only for vector instructions, which the probe steps over
  Semantics semantics(probe, no_window, arg_values, dmas, chip, options, unused);
  size_t pc = 0;
  for (int step = 0; step < kProbeSteps && pc < code.size(); ++step) {
    const isa::Instruction& ins = code[pc];
    const isa::Unit unit = isa::info(ins.opcode).unit;
    if (unit == isa::Unit::Dma || ins.opcode == isa::Opcode::Semwait || ins.opcode == isa::Opcode::Sld ||
        ins.opcode == isa::Opcode::Trap) {
      return true;
    }
    if (unit != isa::Unit::Scalar && unit != isa::Unit::Branch) {
      ++pc;
      continue;
    }
    try {
      const StepOutcome out = semantics.step(ins, pc);
      if (out.halt) return false;
      pc = out.next_pc;
    } catch (const SimError&) {
      return true;  // the real run reports it
    }
  }
  return true;
}

}  // namespace vtpu::sim
