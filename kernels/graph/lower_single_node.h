// Lowers a fusion group of fusion's Copy kind, one node that no other joins (a strided copy, a
// concat, a gather, a scatter-add, random numbers, iota, int64 narrowing, a column reduction, fused
// attention or its backward), to its launch. Part of lower_group; throws KernelError.
#pragma once

#include "kernels/graph/fusion.h"
#include "kernels/graph/graph.h"
#include "kernels/graph/launch.h"
#include "sim/chip_config.h"

namespace vtpu::kernels {

Launch lower_single_node(const Graph& g, const KernelGroup& grp, const sim::ChipConfig& chip, ProgramCache& cache);

}  // namespace vtpu::kernels
