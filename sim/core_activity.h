// Which TensorCores of a launch will move data. A .multicore kernel cuts its units into one
// share per core, and a core whose share is empty (a matmul of 8 rows: one 8-row unit) halts
// after its prologue. Such a core draws no HBM bandwidth, so the cores that do work share the
// chip's among themselves; the executor asks this before it fixes each core's share.
#pragma once

#include <cstdint>
#include <vector>

#include "isa/instruction.h"
#include "sim/chip_config.h"
#include "sim/launch.h"

namespace vtpu::sim {

// Whether core `core_index` of `cores` issues a DMA before it halts. Follows the program's scalar
// control flow only (vector, MXU and VMEM-store instructions cannot steer it and are stepped
// over) until the first DMA (true) or halt (false); anything it cannot decide without running
// the core for real (a scalar VMEM load, a semaphore wait, a trap, a scalar error, a long
// stretch without either) counts as moving data, so a doubt never takes bandwidth from a core.
bool core_moves_data(const std::vector<isa::Instruction>& code, const std::vector<int32_t>& arg_values,
                     const ChipConfig& chip, const SimOptions& options, int core_index, int cores);

}  // namespace vtpu::sim
