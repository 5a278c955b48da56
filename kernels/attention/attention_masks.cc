#include "kernels/attention/attention_masks.h"

#include <limits>

#include "kernels/codegen/vreg_shape.h"

namespace vtpu::kernels {

AttentionConstants emit_attention_constants(AsmWriter& w, RegisterPool& vregs, const AttentionSpec& spec, bool ragged_keys,
                                            int scratch) {
  AttentionConstants c;
  c.zero = vregs.take();
  c.neg_inf = vregs.take();
  c.scale = vregs.take();
  w.line("vbcast v{}, s0", c.zero);
  w.load_float(scratch, -std::numeric_limits<float>::infinity());
  w.line("vbcast v{}, s{}", c.neg_inf, scratch);
  w.load_float(scratch, static_cast<float>(spec.scale));
  w.line("vbcast v{}, s{}", c.scale, scratch);
  if (!spec.causal && !ragged_keys) return c;
  c.lane = vregs.take();
  const int sub = vregs.take(), mask127 = vregs.take();
  w.load_immediate(scratch, kLanes - 1);
  w.line("vbcast v{}, s{}", mask127, scratch);
  w.line("viota v{}", c.lane);  // s * 128 + l
  w.line("vshri v{}, v{}, 7", sub, c.lane);
  w.line("vand v{}, v{}, v{}", c.lane, c.lane, mask127);
  w.line("vcvt.i2f v{}, v{}", c.lane, c.lane);
  w.line("vcvt.i2f v{}, v{}", sub, sub);
  vregs.release(mask127);
  if (spec.causal) {
    c.lane_minus_sub = sub;
    w.line("vsub v{}, v{}, v{}", c.lane_minus_sub, c.lane, sub);
  } else {
    vregs.release(sub);
  }
  return c;
}

void mask_keys_past(AsmWriter& w, const AttentionConstants& c, int x, int base, int64_t offset, int position, int th, int scratch,
                    int mask) {
  w.line("saddi s{}, s{}, {}", scratch, base, offset);
  w.line("vbcast v{}, s{}", th, scratch);
  w.line("vcvt.i2f v{}, v{}", th, th);
  w.line("vcmp.lt m{}, v{}, v{}", mask, th, position);
  w.line("vsel v{}, m{}, v{}, v{}", x, mask, c.neg_inf, x);
}

}  // namespace vtpu::kernels
