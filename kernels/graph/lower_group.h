// Lowers one fusion group to a launch: the group's kernel spec, its program (through the program
// cache) and the launch's arguments. Throws KernelError naming the fused kernel, its inputs and its
// outputs when no generator serves the group.
#pragma once

#include "kernels/graph/fusion.h"
#include "kernels/graph/graph.h"
#include "kernels/graph/launch.h"
#include "sim/chip_config.h"

namespace vtpu::kernels {

Launch lower_group(const Graph& graph, const KernelGroup& grp, const sim::ChipConfig& chip, ProgramCache& cache);

}  // namespace vtpu::kernels
