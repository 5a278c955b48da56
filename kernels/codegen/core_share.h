// How a .multicore kernel divides its work among the TensorCores of a launch: a count of
// independent units (blocks, row blocks, strips) is cut into contiguous shares, core c taking
// units [c * n / cores, (c + 1) * n / cores). Contiguous shares keep each core's DMAs sequential
// in HBM and its first/last-unit logic unchanged; the same code runs on one core (sncore = 1)
// with the whole range, so results never depend on the core count.
#pragma once

#include "kernels/codegen/asm_writer.h"

namespace vtpu::kernels {

// s`first` = the first unit of this core's share of s`end` units and s`end` = one past its last.
// With `unit` >= 0, s`end` counts jobs that go in indivisible groups of s`unit` (e.g. a strip's
// row blocks): shares are whole groups and both results are in jobs. Uses two scratch registers.
void emit_core_share(AsmWriter& w, int first, int end, int unit = -1);

// emit_core_share, then a core whose share is empty (fewer units than cores) halts: for kernels
// with work before their loop (prefetches, constants) that would have nothing to wait for.
void emit_core_share_or_halt(AsmWriter& w, int first, int end, int unit = -1);

}  // namespace vtpu::kernels
