// Indices read on the chip, shared by the gather and scatter-add kernels: a chunk of them goes
// through VMEM in one DMA, and each is read with `sld` and checked against the table before it
// addresses anything; a bad one branches to the kernel's out-of-line trap.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/codegen/asm_writer.h"

namespace vtpu::kernels {

// Scalar registers issue_index_chunk reads (n, base, one: 1) and writes (the rest).
struct IndexChunkRegs {
  int n, base, one;          // index count, first index of the chunk, the constant 1
  int cnt, hb, vm, bytes, scratch;
};

// s`cnt` = min(chunk, n - base); DMAs indices [base, base + cnt) (`index_bytes` each) from
// argument `index_arg` to VMEM at `index_vmem`, signalling sem0 (the caller waits).
void issue_index_chunk(AsmWriter& w, const IndexChunkRegs& r, int index_arg, int index_bytes, uint64_t index_vmem,
                       int64_t chunk);

// s`idx` = the index at VMEM s`cursor`; branches to `bad` unless 0 <= idx < s`rows`. int64
// indices (`pairs`) are read as their low word, and their high word must be 0. With
// `wrap_negative` (torch's indexing), -rows <= idx < 0 counts from the end (idx + rows); an int64
// negative index then has the high word -1.
void read_index(AsmWriter& w, int idx, int cursor, int rows, int scratch, bool pairs, const std::string& bad,
                bool wrap_negative = false);

// The trap `bad` branches to, placed out of line.
void place_index_trap(AsmWriter& w, const std::string& bad);

}  // namespace vtpu::kernels
