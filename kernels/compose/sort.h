// Sorting rows by counting, the way a machine without data-dependent control flow can: element
// i's rank is the number of elements ordered before it (all pairs compared, [rows, n, n], and a
// row sum), then output position p takes the element whose rank is p (ranks compared with
// positions, a masked row maximum: exactly one element qualifies). Ties keep their positions'
// order (a stable sort), NaN sorts after +inf as in torch. n^2 compares per row: for the short
// rows models sort (mixture-of-experts routing, candidate lists); vocabularies take the bitonic
// network below.
#pragma once

#include <cstdint>

#include "kernels/graph/graph.h"

namespace vtpu::kernels {

struct SortedRows {
  int values;     // f32 [rows, n], x's values in order
  int positions;  // f32 [rows, n], where each came from (exact: n < 2^24)
};

// Sorts each row of x (f32 [rows, n]) ascending, or descending (largest first; ties still in
// position order, as torch's stable sort).
SortedRows sort_rows(Graph& g, int x, bool descending, const std::string& label = "sort");

// The largest rows * n^2 sort_rows takes (the pairwise compares it materialises).
constexpr int64_t kSortMaxPairs = int64_t{1} << 22;

// The same order for long rows (vocabularies: top-p sampling), by a bitonic network
// (kernels/compose/bitonic_sort.cc): rows padded to a power of two P, log2(P) (log2(P) + 1) / 2
// compare-and-swap steps of strided copies and elementwise kernels, P log^2 P work instead of
// n^2. Rows up to kBitonicMaxLength (positions stay exact in f32).
SortedRows bitonic_sort_rows(Graph& g, int x, bool descending, const std::string& label = "sort");
constexpr int64_t kBitonicMaxLength = int64_t{1} << 24;

}  // namespace vtpu::kernels
