// See broadcast_layout.h.
#include "kernels/graph/broadcast_layout.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "kernels/codegen/kernel_error.h"

namespace vtpu::kernels {

std::pair<int64_t, int64_t> rows_cols(const std::vector<int64_t>& shape) {
  if (shape.empty()) return {1, 1};
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < shape.size(); ++i) rows *= shape[i];
  return {rows, shape.back()};
}

Layout broadcast_layout(const std::vector<int64_t>& shape, const std::vector<int64_t>& out) {
  // Drop leading 1s: they never change the flattened order.
  std::vector<int64_t> s(shape.begin(), shape.end());
  while (!s.empty() && s.front() == 1 && s.size() > 0) s.erase(s.begin());
  std::vector<int64_t> o(out.begin(), out.end());
  while (o.size() > s.size() && !o.empty() && o.front() == 1) o.erase(o.begin());
  int64_t numel = 1;
  for (int64_t d : s) numel *= d;
  if (numel == 1) return Layout::Scalar;
  if (s == o) return Layout::Full;
  if (!out.empty() && s.size() == 1 && s[0] == out.back()) return Layout::Row;
  // the trailing dims of out, repeated along the leading ones (rows stay a multiple of the period)
  if (s.size() >= 2 && s.size() < o.size() && std::equal(s.begin(), s.end(), o.end() - s.size())) {
    // Blocks are whole periods of 8-row groups (see BlockStream).
    if ((numel / s.back()) % 8 == 0) return Layout::Periodic;
  }
  // [..., 1] matching every leading dim of out: one value per row
  if (!out.empty() && !s.empty() && s.back() == 1) {
    std::vector<int64_t> lead(s.begin(), s.end() - 1), out_lead(out.begin(), out.end() - 1);
    while (!out_lead.empty() && out_lead.front() == 1 && out_lead.size() > lead.size()) out_lead.erase(out_lead.begin());
    if (lead == out_lead) return Layout::Column;
  }
  throw KernelError(fmt::format("broadcasting [{}] to [{}] is not a layout kernels stream (needs a materialising copy)",
                                fmt::join(shape, ","), fmt::join(out, ",")));
}

}  // namespace vtpu::kernels
