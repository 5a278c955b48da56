// The matmul's operands on the vector unit: broadcast epilogue operands loaded once, B staged
// into bf16 weight parts (transposed through vtrans when given as [N, K]), transposed A turned
// into the A panel, and LHS rows peeled into parts for multi-pass products.
#include "kernels/generators/matmul_builder.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "kernels/codegen/bf16_parts.h"
#include "kernels/codegen/block_stream.h"
#include "kernels/codegen/tile_codegen.h"
#include "kernels/codegen/vreg_shape.h"

namespace vtpu::kernels::matmul_detail {

// Row, Column and Scalar epilogue operands are loaded once, before the first block.
void MatmulBuilder::load_broadcast_operands(RegisterPool& vregs) {
  auto& r = w_.sregs();
  int pending = 0;
  for (auto& e : epilogue_) {
    if (e.operand.layout == Layout::Full) continue;
    const int vm = r.take(), hb = r.take(), one = r.take(), bytes = r.take();
    // the whole operand in one row: [N], [M] (N and M at launch, at most the capacity) or one element
    const int64_t capacity = e.operand.layout == Layout::Row ? spec_.n : e.operand.layout == Layout::Column ? spec_.m : 1;
    const int count_arg = e.operand.layout == Layout::Row ? n_arg_ : m_arg_;
    w_.load_immediate(vm, e.vmem[0]);
    w_.line("sarg s{}, {}", hb, e.arg);
    w_.load_immediate(one, 1);
    if (e.operand.layout == Layout::Scalar) {
      w_.load_immediate(bytes, e.eb);
    } else {
      pitch(bytes, count_arg, e.eb);
    }
    dma(true, kSemPrologue, vm, hb, one, bytes, capacity * e.eb, count_arg, e.eb);
    ++pending;
    for (int x : {vm, hb, one, bytes}) r.release(x);
  }
  if (pending) w_.line("sem.wait sem{}, {}", kSemPrologue, pending);
  for (auto& e : epilogue_) {
    if (e.operand.layout != Layout::Scalar) continue;
    const int vm = r.take();
    w_.load_immediate(vm, e.vmem[0]);
    e.preset_vreg = vregs.take();
    load_scalar_broadcast(w_, e.operand.dtype, e.preset_vreg, vm);
    r.release(vm);
  }
}

// Writes the stored weight parts of `x` (f32 in a vreg) to VMEM at s`addr` + offset (+ part_bytes
// per part), rows `stride` apart. Part 0 is x rounded, part 1 the rounding error rounded, part 2
// what is left after that; with finite_passes_, x's part 0 as it is comes first, then the parts
// of its finite form (v`zero` holds 0).
void MatmulBuilder::store_parts(int x, int addr, int64_t offset, int64_t stride, RegisterPool& vregs, RegisterPool& masks,
                                int zero) {
  store_weight_parts(w_, vregs, masks, x, addr, offset, b_parts_, finite_passes_, zero, int64_t(part_bytes_), stride);
}

// Converts slice kt of the staged B panel into the stored weight parts. `panel` and `staging`
// hold this nb's buffers; v`zero` holds 0 (with finite_passes_).
void MatmulBuilder::convert_slice(int kt, int panel, int staging, RegisterPool& vregs, RegisterPool& masks, int zero) {
  auto& r = w_.sregs();
  const int src = r.take(), dst = r.take(), t = r.take(), i = r.take(), n = r.take();
  const char* load = load_mnemonic(spec_.b_dtype);
  if (!spec_.b_transposed) {
    // rows kt*D .. +D of staging [Kpad, BN] -> the same rows of each part [Kpad, BN]
    w_.line("smuli s{}, s{}, {}", t, kt, d_ * bn_ * eb_b_);
    w_.line("sadd s{}, s{}, s{}", src, staging, t);
    w_.line("smuli s{}, s{}, {}", t, kt, d_ * bn_ * 2);
    w_.line("sadd s{}, s{}, s{}", dst, panel, t);
    const std::string loop = w_.new_label("convert");
    w_.line("sli s{}, 0", i);
    w_.load_immediate(n, d_ / kSublanes);
    w_.place(loop);
    const int x = vregs.take();
    for (int64_t c = 0; c < bn_ / kLanes; ++c) {
      w_.line("{} v{}, m0, s{}, {}, {}", load, x, src, c * kLanes * eb_b_, bn_ * eb_b_);
      store_parts(x, dst, c * kLanes * 2, bn_ * 2, vregs, masks, zero);
    }
    vregs.release(x);
    w_.line("saddi s{}, s{}, {}", src, src, kSublanes * bn_ * eb_b_);
    w_.line("saddi s{}, s{}, {}", dst, dst, kSublanes * bn_ * 2);
    w_.line("saddi s{}, s{}, 1", i, i);
    w_.line("blt s{}, s{}, {}", i, n, loop);
  } else {
    // staging [BN, Kpad]: each 128x128 block (n chunk c, k chunk q) is transposed in 16 vregs
    const int block = vregs.take_run(16);
    for (int64_t c = 0; c < bn_ / kLanes; ++c) {
      for (int q = 0; q < group_; ++q) {
        w_.line("smuli s{}, s{}, {}", t, kt, d_ * eb_b_);
        w_.line("saddi s{}, s{}, {}", src, t, c * kLanes * k_pad_ * eb_b_ + q * kLanes * eb_b_);
        w_.line("sadd s{}, s{}, s{}", src, src, staging);
        for (int v = 0; v < 16; ++v) {
          w_.line("{} v{}, m0, s{}, 0, {}", load, block + v, src, k_pad_ * eb_b_);
          w_.line("saddi s{}, s{}, {}", src, src, kSublanes * k_pad_ * eb_b_);
        }
        w_.line("vtrans v{}, v{}", block, block);
        w_.line("smuli s{}, s{}, {}", t, kt, d_ * bn_ * 2);
        w_.line("saddi s{}, s{}, {}", dst, t, q * kLanes * bn_ * 2 + c * kLanes * 2);
        w_.line("sadd s{}, s{}, s{}", dst, dst, panel);
        for (int v = 0; v < 16; ++v) {
          store_parts(block + v, dst, 0, bn_ * 2, vregs, masks, zero);
          w_.line("saddi s{}, s{}, {}", dst, dst, kSublanes * bn_ * 2);
        }
      }
    }
    vregs.release_run(block, 16);
  }
  for (int x : {src, dst, t, i, n}) r.release(x);
}

// Slice kt of the staged A^T [Kpad, BM] (this block's, of `parity`) into the A panel [BM, Kpad]
// at s`a_base`: 128x128 blocks through vtrans.
void MatmulBuilder::transpose_a_slice(int kt, int a_base, int parity, RegisterPool& vregs) {
  auto& r = w_.sregs();
  const int src = r.take(), dst = r.take();
  const int block = vregs.take_run(16);
  const int64_t pitch = a_stage_pitch_, chunks = a_stage_pitch_ / eb_a_ / kLanes;
  for (int q = 0; q < group_; ++q) {
    for (int64_t ch = 0; ch < chunks; ++ch) {
      w_.line("smuli s{}, s{}, {}", src, kt, d_ * pitch);
      w_.line("saddi s{}, s{}, {}", src, src, int64_t(a_staging_[parity]) + q * kLanes * pitch + ch * kLanes * eb_a_);
      for (int v = 0; v < 16; ++v) {
        w_.line("{} v{}, m0, s{}, 0, {}", load_mnemonic(spec_.a_dtype), block + v, src, pitch);
        w_.line("saddi s{}, s{}, {}", src, src, kSublanes * pitch);
      }
      w_.line("vtrans v{}, v{}", block, block);
      w_.line("smuli s{}, s{}, {}", dst, kt, d_ * eb_a_);
      w_.line("sadd s{}, s{}, s{}", dst, dst, a_base);
      w_.line("saddi s{}, s{}, {}", dst, dst, ch * kLanes * k_pad_ * eb_a_ + q * kLanes * eb_a_);
      for (int v = 0; v < 16 && ch * kLanes + 8 * v < bm_; ++v) {  // the panel has BM rows
        w_.line("{} v{}, m0, s{}, 0, {}", store_mnemonic(spec_.a_dtype), block + v, dst, k_pad_ * eb_a_);
        w_.line("saddi s{}, s{}, {}", dst, dst, kSublanes * k_pad_ * eb_a_);
      }
    }
  }
  vregs.release_run(block, 16);
  r.release(src);
  r.release(dst);
}

// The LHS part `pass` multiplies, of 8 x D rows, into the group starting at `g`: in the leading
// pass from the A panel at s`addr`; in the others (finite_passes_) from the rows' finite form the
// leading pass stored at s`addr` (store_finite_lhs), f32 rows D apart.
void MatmulBuilder::load_lhs(int g, int addr, std::pair<int, int> pass, RegisterPool& vregs) {
  const bool finite = multiplies_finite_forms(pass, finite_passes_);
  for (int q = 0; q < group_; ++q) {
    if (finite) {
      w_.line("vld v{}, m0, s{}, {}, {}", g + q, addr, q * kLanes * 4, d_ * 4);
    } else {
      w_.line("{} v{}, m0, s{}, {}, {}", load_mnemonic(spec_.a_dtype), g + q, addr, q * kLanes * eb_a_, k_pad_ * eb_a_);
    }
    peel_bf16_parts(w_, vregs, g + q, 1, 0, pass.first);
  }
}

// After the leading pass pushed LHS rows g..: their finite form, f32, to s`addr` (rows D apart),
// for the other passes of the slice to load. Made once per slice, not once per pass: four vector
// instructions per vreg where making it in each of five passes took fifteen.
void MatmulBuilder::store_finite_lhs(int g, int addr, RegisterPool& vregs, RegisterPool& masks, int zero) {
  const int scratch = vregs.take();
  for (int q = 0; q < group_; ++q) {
    finite_form(w_, masks, g + q, g + q, zero, scratch);
    w_.line("vst v{}, m0, s{}, {}, {}", g + q, addr, q * kLanes * 4, d_ * 4);
  }
  vregs.release(scratch);
}

}  // namespace vtpu::kernels::matmul_detail
