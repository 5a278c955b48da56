// cumsum as the MXU computes scans: the scanned dim moved last, x [rows, n] @ U [n, n] with
// U[k][j] = (k <= j), a triangular matrix of ones (from iotas and a compare; exact in bf16), and
// moved back. n^2 multiply-adds per row instead of n adds, which the MXU does at ~n/128 cycles
// per 8 rows: fine for the lengths models scan (positions from masks, cumulative probabilities).
// Rows past 2048 are scanned in blocks of 2048, each offset by the scan of the blocks' totals
// (n * 2048 multiply-adds per row), so any length runs.
// f32 inputs take `passes` bf16 parts (U has one), so 3 passes give f32-accurate products; the
// summation order is the MXU's, not torch's left to right (f32 rounding differs in the last bits).
#pragma once

#include <cstdint>

#include "kernels/compose/int64_words.h"
#include "kernels/graph/graph.h"

namespace vtpu::kernels {

// The f32 cumulative sum of finite x (f32 or bf16; integers as f32 are exact while partial sums
// stay below 2^24 and `passes` covers their bits: 6 for 24-bit integers) along `dim`
// (non-negative): counts and masks (compaction.h). An infinity or NaN spreads to the whole row
// (the triangle's zeros multiply it).
int cumsum(Graph& g, int x, int64_t dim, int passes);

// torch's float cumsum: as cumsum, with infinities and NaN propagating as the CPU's running sum
// does, from their position on (+inf, -inf, NaN where both or a NaN were met); two more
// one-pass scans of masks find where.
int float_cumsum(Graph& g, int x, int64_t dim, int passes);

// The int32 cumulative sum of int32 x along `dim`, exact for every int32 value and wrapping as
// torch's int32 cumsum does: the words split into four bytes (exact bf16 digits), each byte plane
// is scanned by one bf16 MXU pass with f32 accumulation, and the planes recombine as
// sum(scan_b * 2^(8b)) in wrapping int32. Four passes, like f32's 'high' precision; lengths above
// kMaxExactByteSum (int64_words.h) are refused.
int cumsum_int32(Graph& g, int x, int64_t dim);

// The int64 cumulative sum of int64 `pairs` (i32[..., 2] word pairs, int64_words.h) along `dim` of
// their leading shape, as word pairs: exact for every value and wrapping modulo 2^64 as torch's, by
// eight byte planes of one bf16 pass each. Lengths above kMaxExactByteSum are refused.
int cumsum_int64(Graph& g, int pairs, int64_t dim);

}  // namespace vtpu::kernels
