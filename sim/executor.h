// Runs a Program on the simulated chip: functional semantics and the timing model step together,
// instruction by instruction, on each TensorCore that takes part (in parallel with oneTBB).
#pragma once

#include <span>

#include "isa/program.h"
#include "sim/chip_config.h"
#include "sim/hbm.h"
#include "sim/launch.h"
#include "sim/prepared_program.h"
#include "sim/vmem_pool.h"
#include "traces/trace_recorder.h"

namespace vtpu::sim {

// Throws SimError (or its subclasses) for anything the program does wrong; HBM keeps whatever the
// program wrote before the error.
LaunchResult execute(const isa::Program& program, std::span<const KernelArg> args, const ChipConfig& chip, Hbm& hbm,
                     const SimOptions& options, traces::TraceRecorder* trace = nullptr);
// The same with `program` already prepared for `chip` (sim/prepared_program.h), its VMEM taken
// from (and given back to) `vmem_pool` when one is given. Buffer arguments whose address lies in
// `held` (VMEM held across launches) are read and written there, by local DMAs.
LaunchResult execute(const isa::Program& program, const PreparedProgram& prepared, std::span<const KernelArg> args,
                     const ChipConfig& chip, Hbm& hbm, const SimOptions& options, traces::TraceRecorder* trace = nullptr,
                     VmemPool* vmem_pool = nullptr, Hbm* held = nullptr);

}  // namespace vtpu::sim
