#include "kernels/codegen/bf16_parts.h"

#include <fmt/format.h>

#include <algorithm>

namespace vtpu::kernels {

void store_bf16_parts(AsmWriter& w, RegisterPool& vregs, int x, int addr, int64_t offset, int parts, int64_t part_stride,
                      int64_t row_stride) {
  const int hi = vregs.take(), at = w.sregs().take();
  for (int p = 0; p < parts; ++p) {
    w.line("saddi s{}, s{}, {}", at, addr, offset + p * part_stride);
    w.line("vst.bf16 v{}, m0, s{}, 0, {}", x, at, row_stride);  // the store rounds: part p
    if (p + 1 < parts) {
      w.line("vcvt.bf16 v{}, v{}", hi, x);
      w.line("vsub v{}, v{}, v{}", x, x, hi);
    }
  }
  vregs.release(hi);
  w.sregs().release(at);
}

void store_weight_parts(AsmWriter& w, RegisterPool& vregs, RegisterPool& masks, int x, int addr, int64_t offset, int parts,
                        bool finite_passes, int zero, int64_t part_stride, int64_t row_stride) {
  if (!finite_passes && parts == 1) {  // one store, which rounds: nothing peeled, x unchanged
    store_bf16_parts(w, vregs, x, addr, offset, 1, part_stride, row_stride);
    return;
  }
  const int rest = vregs.take();
  if (finite_passes) {
    store_bf16_parts(w, vregs, x, addr, offset, 1, 0, row_stride);
    finite_form(w, masks, rest, x, zero, rest);
    offset += part_stride;
  } else {
    w.line("vmov v{}, v{}", rest, x);
  }
  store_bf16_parts(w, vregs, rest, addr, offset, parts, part_stride, row_stride);
  vregs.release(rest);
}

void finite_form(AsmWriter& w, RegisterPool& masks, int dst, int x, int zero, int scratch) {
  const int finite = masks.take();
  w.line("vsub v{}, v{}, v{}", scratch, x, x);
  w.line("vcmp.eq m{}, v{}, v{}", finite, scratch, scratch);
  w.line("vsel v{}, m{}, v{}, v{}", dst, finite, x, zero);
  masks.release(finite);
}

std::vector<int> lhs_parts_against(const std::vector<std::pair<int, int>>& pairs, int b, bool finite_passes) {
  std::vector<int> out;
  for (auto pass : pairs) if (stored_weight_part(pass, finite_passes) == b) out.push_back(pass.first);
  std::sort(out.begin(), out.end());
  return out;
}

void lhs_for_weight_part(AsmWriter& w, RegisterPool& masks, int x, int count, int b, bool finite_passes, int zero,
                         int scratch) {
  if (!finite_passes || b == 0) return;
  for (int i = 0; i < count; ++i) finite_form(w, masks, x + i, x + i, zero, scratch);
}

void peel_bf16_parts(AsmWriter& w, RegisterPool& vregs, int x, int count, int from, int to) {
  if (from >= to) return;
  const int hi = vregs.take();
  for (int p = from; p < to; ++p) {
    for (int g = 0; g < count; ++g) {
      w.line("vcvt.bf16 v{}, v{}", hi, x + g);
      w.line("vsub v{}, v{}, v{}", x + g, x + g, hi);
    }
  }
  vregs.release(hi);
}

std::vector<std::pair<int, int>> mxu_pass_pairs(int passes) {
  if (passes == 1) return {{0, 0}};
  if (passes == 3) return {{0, 0}, {0, 1}, {1, 0}};
  if (passes == 6) return {{0, 0}, {0, 1}, {1, 0}, {0, 2}, {2, 0}, {1, 1}};
  throw KernelError(fmt::format("matmul: {} passes is not 1, 3 or 6", passes));
}

}  // namespace vtpu::kernels
