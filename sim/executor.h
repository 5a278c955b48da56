// Runs a Program on the simulated chip: functional semantics and the timing model step together,
// instruction by instruction, on each TensorCore that takes part (in parallel with oneTBB).
#pragma once

#include <span>
#include <vector>

#include "isa/program.h"
#include "sim/arg_window.h"
#include "sim/chip_config.h"
#include "sim/hbm.h"
#include "sim/launch.h"
#include "sim/prepared_program.h"
#include "sim/vmem_pool.h"
#include "traces/trace_recorder.h"

namespace vtpu::sim {

struct CoreRun;

// A launch's buffer arguments mapped into the kernel's address window (buffers whose address lies
// in `held` are VMEM held across launches), and the values `sarg` reads. Throws SimError for
// arguments that do not match the program's.
struct MappedArguments {
  ArgWindow window;
  std::vector<int32_t> values;
};
MappedArguments map_arguments(const isa::Program& program, std::span<const KernelArg> args, Hbm& hbm, Hbm* held = nullptr);
// One launch's summary from its cores' runs.
LaunchResult summarize(const ChipConfig& chip, int cores, const std::vector<CoreRun>& runs);

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
