// Row gather: out[i] = table[index[i]] for a [rows, width] table (torch.index_select along dim 0,
// and so nn.Embedding). The indices are read on the chip with `sld` (data-dependent addressing),
// each row moved by DMA; an index outside the table traps (TrapCode::IndexOutOfRange, kernels/
// index_reader.h) instead of reading other memory.
#pragma once

#include <cstdint>

#include "isa/program.h"
#include "kernels/codegen/dtype.h"
#include "sim/chip_config.h"

namespace vtpu::kernels {

struct GatherSpec {
  DType dtype = DType::F32;  // of the table and the output
  int64_t width = 1;         // elements per table row
  // int64 indices (torch's default) are read as their two int32 words, little-endian: the low
  // word is the row and the high word must be 0 (a negative or >= 2^31 index traps).
  bool index_pairs = false;
  bool wrap_negative = false;  // torch indexing (x[idx]): -rows <= idx < 0 counts from the end
};

// Kernel arguments: the table, the indices (int32, or int32 pairs), the output, then two scalars:
// the number of indices and the number of table rows. One program serves every count of both.
isa::Program make_gather(const GatherSpec& spec, const sim::ChipConfig& chip);

}  // namespace vtpu::kernels
