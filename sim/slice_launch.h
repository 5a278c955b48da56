// A slice launch: one program run on every chip of a slice at once (SPMD, as a Pallas kernel runs
// on every device of a mesh), one TensorCore per chip, chips reaching each other by dma.remote
// over the ICI links (sim/ici_links.h). The chips are simulated together: the core whose next
// instruction issues earliest steps next, and a sem.wait whose signals another chip has yet to
// send blocks its core until they are sent, so data crossing chips is always there when it is read.
#pragma once

#include <span>
#include <vector>

#include "isa/program.h"
#include "sim/chip_config.h"
#include "sim/hbm.h"
#include "sim/ici_links.h"
#include "sim/interconnect.h"
#include "sim/launch.h"
#include "traces/trace_recorder.h"

namespace vtpu::sim {

struct SliceLaunchResult {
  std::vector<LaunchResult> chips;  // per chip: its cycles include waiting for other chips
  uint64_t cycles = 0;              // the last chip's
  std::vector<LinkUsage> links;     // links that carried data
};

// Chip i runs `program` with `args[i]` over `hbms[i]`. Every chip must pass buffers of the same
// sizes in the same order, so a kernel address names the same buffer on every chip. Throws
// SimError as a single-chip launch does, and for a deadlock across chips (every chip still
// running waits for signals that no chip will send).
SliceLaunchResult execute_slice(const isa::Program& program, const ChipConfig& chip, const Slice& slice,
                                std::span<const std::vector<KernelArg>> args, std::span<Hbm* const> hbms,
                                const SimOptions& options = {}, traces::TraceRecorder* trace = nullptr);

}  // namespace vtpu::sim
