// Element offsets of an outer index of a strided view, decoded on the chip from launch scalars:
// the strided copy and the transpose both walk a view's outer dims this way.
#pragma once

#include "kernels/codegen/asm_writer.h"

namespace vtpu::kernels {

// s`dst` += sum over outer dims i of ((s`index` / after_i) % size_i) * stride_i, where after_i is
// the product of the sizes of the dims after i. Size i is launch argument `first_arg` + i and
// stride i is argument `first_arg` + rank + i. Clobbers s`after`, s`digit` and s`scratch`.
void add_outer_offset(AsmWriter& w, int dst, int index, int rank, int first_arg, int after, int digit, int scratch);

}  // namespace vtpu::kernels
