// The semantics of the instructions that move data: vector loads and stores (masked, strided,
// bf16/f16/int8 forms), MXU weight loads and matmul pushes (bf16 products, f32 accumulation), and DMA
// between HBM and VMEM. Each checks its addresses and records the regions it touches for the
// executor's race and ordering checks (semantics.h).
#include "sim/semantics.h"

#include <fmt/format.h>

#include <Eigen/Core>
#include <bit>
#include <cmath>
#include <cstring>

#include "isa/disassembler.h"
#include "isa/verifier.h"
#include "sim/bf16.h"
#include "sim/f16.h"
#include "sim/mxu_product.h"
#include "sim/sim_error.h"

namespace vtpu::sim {
namespace {

using isa::Opcode;

// The 8 sublane rows of a vector access as a strided region, so tiles interleaved in VMEM do not
// look dependent; falls back to the bounding range for odd strides.
Region sublane_region(int64_t base, int64_t stride, int elem, uint64_t lo, uint64_t hi) {
  if (stride >= kLanes * elem && base >= 0) {
    return {static_cast<uint64_t>(base), kSublanes, uint64_t(kLanes) * elem, static_cast<uint64_t>(stride)};
  }
  return Region::range(lo, hi);
}

// The lanes of sublane `sl` that the mask enables: the first and last ({-1, -1} when none), and
// whether every lane between them is enabled (a whole row usually is: copied without per-lane
// tests).
struct EnabledLanes {
  int first = -1, last = -1;
  bool dense = false;
};

EnabledLanes enabled_lanes(const MaskReg& mask, int sl) {
  const uint8_t* m = mask.data() + sl * kLanes;
  // No zero byte: every lane enabled. memchr scans the row with the host's widest vectors, where a
  // loop over the lanes was most of a load's or a store's host time.
  if (!std::memchr(m, 0, kLanes)) return {0, kLanes - 1, true};
  EnabledLanes lanes;
  for (int l = 0; l < kLanes; ++l) {
    if (m[l]) {
      if (lanes.first < 0) lanes.first = l;
      lanes.last = l;
    }
  }
  return lanes;
}

// Calls copy(l) for every enabled lane l of `lanes` in sublane `sl`.
template <typename Copy>
void for_enabled_lanes(const MaskReg& mask, int sl, const EnabledLanes& lanes, Copy copy) {
  if (lanes.dense) {
    for (int l = lanes.first; l <= lanes.last; ++l) copy(l);
    return;
  }
  const uint8_t* m = mask.data() + sl * kLanes;
  for (int l = lanes.first; l <= lanes.last; ++l) {
    if (m[l]) copy(l);
  }
}

}  // namespace

void Semantics::vector_load(const isa::Instruction& ins, StepOutcome& out) {
  const auto& o = ins.operands;
  const int elem = isa::vector_element_bytes(ins.opcode);
  const bool half = ins.opcode == Opcode::Vldh;          // the other 2-byte load is bf16
  const bool zero_extend = ins.opcode == Opcode::Vldu8;  // the other 1-byte load sign-extends
  const MaskReg& mask = core_.masks[o[1]];
  const int64_t base = int64_t{static_cast<uint32_t>(core_.sregs[o[2]])} + o[3];
  const int64_t stride = o[4];
  // Written in place: a failed check throws out of the launch, so no half-loaded register is seen.
  VReg& r = core_.vregs[o[0]];
  r.fill(0.f);  // lanes the mask disables read as zero
  uint64_t lo = UINT64_MAX, hi = 0;
  for (int sl = 0; sl < kSublanes; ++sl) {
    const int64_t row = base + sl * stride;
    if (row % elem != 0) fail(SimErrorKind::Misaligned, fmt::format("address {} not aligned to {} bytes", row, elem));
    // Only enabled lanes are accessed.
    const EnabledLanes lanes = enabled_lanes(mask, sl);
    if (lanes.first < 0) continue;
    const int64_t row_lo = row + int64_t{lanes.first} * elem, row_hi = row + int64_t{lanes.last + 1} * elem;
    if (row_lo < 0) fail(SimErrorKind::OutOfBounds, fmt::format("VMEM read at negative address {}", row_lo));
    check_vmem(static_cast<uint64_t>(row_lo), static_cast<uint64_t>(row_hi), false);
    lo = std::min<uint64_t>(lo, row_lo);
    hi = std::max<uint64_t>(hi, row_hi);
    if (options_.timing_only) continue;
    const uint8_t* src = core_.vmem.get() + row;
    float* dst = &r[sl * kLanes];
    if (elem == 4) {
      for_enabled_lanes(mask, sl, lanes, [&](int l) { std::memcpy(&dst[l], src + 4 * l, 4); });
    } else if (elem == 2) {
      const auto bits = [&](int l) {
        uint16_t b;
        std::memcpy(&b, src + 2 * l, 2);
        return b;
      };
      if (half) {
        for_enabled_lanes(mask, sl, lanes, [&](int l) { dst[l] = f16_bits_to_f32(bits(l)); });
      } else {
        for_enabled_lanes(mask, sl, lanes, [&](int l) { dst[l] = bf16_bits_to_f32(bits(l)); });
      }
    } else if (zero_extend) {
      for_enabled_lanes(mask, sl, lanes, [&](int l) { dst[l] = std::bit_cast<float>(int32_t{src[l]}); });
    } else {
      for_enabled_lanes(mask, sl, lanes,
                        [&](int l) { dst[l] = std::bit_cast<float>(int32_t{static_cast<int8_t>(src[l])}); });
    }
  }
  if (hi > lo) out.vmem_read = sublane_region(base, stride, elem, lo, hi);
}

void Semantics::vector_store(const isa::Instruction& ins, StepOutcome& out) {
  const auto& o = ins.operands;
  const int elem = isa::vector_element_bytes(ins.opcode);
  const bool half = ins.opcode == Opcode::Vsth;  // the other 2-byte store is bf16
  const MaskReg& mask = core_.masks[o[1]];
  const VReg& value = core_.vregs[o[0]];
  const int64_t base = int64_t{static_cast<uint32_t>(core_.sregs[o[2]])} + o[3];
  const int64_t stride = o[4];
  uint64_t lo = UINT64_MAX, hi = 0;
  for (int sl = 0; sl < kSublanes; ++sl) {
    const int64_t row = base + sl * stride;
    if (row % elem != 0) fail(SimErrorKind::Misaligned, fmt::format("address {} not aligned to {} bytes", row, elem));
    const EnabledLanes lanes = enabled_lanes(mask, sl);
    if (lanes.first < 0) continue;
    const int64_t row_lo = row + int64_t{lanes.first} * elem, row_hi = row + int64_t{lanes.last + 1} * elem;
    if (row_lo < 0) fail(SimErrorKind::OutOfBounds, fmt::format("VMEM write at negative address {}", row_lo));
    check_vmem(static_cast<uint64_t>(row_lo), static_cast<uint64_t>(row_hi), true);
    lo = std::min<uint64_t>(lo, row_lo);
    hi = std::max<uint64_t>(hi, row_hi);
    if (options_.timing_only) continue;
    uint8_t* dst = core_.vmem.get() + row;
    const float* src = &value[sl * kLanes];
    if (elem == 4) {
      for_enabled_lanes(mask, sl, lanes, [&](int l) { std::memcpy(dst + 4 * l, &src[l], 4); });
    } else if (elem == 2) {
      const auto put = [&](int l, uint16_t bits) { std::memcpy(dst + 2 * l, &bits, 2); };
      if (half) {
        for_enabled_lanes(mask, sl, lanes, [&](int l) { put(l, f32_to_f16_bits(src[l])); });
      } else {
        for_enabled_lanes(mask, sl, lanes, [&](int l) { put(l, f32_to_bf16_bits(src[l])); });
      }
    } else {
      for_enabled_lanes(mask, sl, lanes, [&](int l) { dst[l] = static_cast<uint8_t>(std::bit_cast<int32_t>(src[l]) & 0xff); });
    }
  }
  if (hi > lo) out.vmem_write = sublane_region(base, stride, elem, lo, hi);
}

void Semantics::mxu_load_weights(const isa::Instruction& ins, StepOutcome& out) {
  const auto& o = ins.operands;
  MxuState& mxu = core_.mxu(o[0]);
  const bool int8 = ins.opcode == Opcode::Mxlwi8;
  const int elem = int8 ? 1 : 2;
  const int64_t base = static_cast<uint32_t>(core_.sregs[o[1]]);
  const int64_t stride = o[2];
  const int d = mxu.dim;
  const int64_t last = base + int64_t{d - 1} * stride;
  const int64_t lo = std::min(base, last), hi = std::max(base, last) + int64_t{d} * elem;
  if (lo < 0) fail(SimErrorKind::OutOfBounds, fmt::format("VMEM read at negative address {}", lo));
  if (base % elem != 0 || stride % elem != 0) fail(SimErrorKind::Misaligned, "weight rows must be aligned to the element size");
  // VMEM row r holds W's row r, or its column r when the load is transposed (mxu.lw.t, mxu.lwb.t).
  const bool transposed = ins.opcode == Opcode::Mxlwt || ins.opcode == Opcode::Mxlwbt;
  const size_t row_step = transposed ? 1 : d, column_step = transposed ? d : 1;
  for (int r = 0; r < d; ++r) {
    const uint64_t row = static_cast<uint64_t>(base + r * stride);
    check_vmem(row, row + uint64_t(d) * elem, false);
    if (options_.timing_only) continue;
    const uint8_t* src = core_.vmem.get() + row;
    const size_t first = size_t(r) * row_step;
    if (int8) {
      for (int c = 0; c < d; ++c) mxu.weights_i8[first + size_t(c) * column_step] = static_cast<int8_t>(src[c]);
      continue;
    }
    float* dst = mxu.back_weights.data() + first;
    const auto bf16_at = [src](int c) {
      uint16_t bits;
      std::memcpy(&bits, src + 2 * c, 2);
      return bf16_bits_to_f32(bits);
    };
    if (column_step == 1) {
      for (int c = 0; c < d; ++c) dst[c] = bf16_at(c);  // a contiguous row: vectorised
    } else {
      for (int c = 0; c < d; ++c) dst[size_t(c) * column_step] = bf16_at(c);
    }
  }
  // mxu.lw loads the back buffer and switches to it at once; mxu.lwb leaves the switch to mxu.swap.
  if (ins.opcode == Opcode::Mxlw || ins.opcode == Opcode::Mxlwt) switch_mxu_weights(mxu);
  out.vmem_read = stride >= 0 ? Region{static_cast<uint64_t>(base), uint64_t(d), uint64_t(d) * elem, uint64_t(stride)}
                              : Region::range(static_cast<uint64_t>(lo), static_cast<uint64_t>(hi));
}

void Semantics::mxu_matmul(const isa::Instruction& ins, StepOutcome& out) {
  const auto& o = ins.operands;
  MxuState& mxu = core_.mxu(o[0]);
  const int d = mxu.dim;
  const int group = d / kLanes;
  const int slot = o[2];
  using RowMajorI = Eigen::Matrix<int32_t, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const size_t slot_base = size_t(slot) * kSublanes * d;
  out.macs = double(kSublanes) * d * d;
  if (options_.timing_only) return;
  if (ins.opcode == Opcode::Mxmm) {
    // The MXU rounds its LHS to bf16 on entry; bf16 x bf16 products are exact in f32.
    if (mxu.slot_is_int[slot]) fail(SimErrorKind::BadLaunch, "f32 matmul into a slot holding int32 results (pop it first)");
    float* lhs = queue_mxu_push(mxu, slot);
    for (int g = 0; g < group; ++g) {
      const VReg& src = core_.vregs[o[1] + g];
      for (int sl = 0; sl < kSublanes; ++sl) {
        for (int l = 0; l < kLanes; ++l) lhs[sl * d + g * kLanes + l] = round_to_bf16(src[sl * kLanes + l]);
      }
    }
  } else {
    run_pending_mxu_pushes(mxu);  // the check below reads the accumulators
    RowMajorI lhs(kSublanes, d);
    for (int g = 0; g < group; ++g) {
      const VReg& src = core_.vregs[o[1] + g];
      for (int sl = 0; sl < kSublanes; ++sl) {
        for (int l = 0; l < kLanes; ++l) {
          lhs(sl, g * kLanes + l) = static_cast<int8_t>(std::bit_cast<int32_t>(src[sl * kLanes + l]) & 0xff);
        }
      }
    }
    bool has_f32 = false;
    for (int i = 0; i < kSublanes * d && !has_f32; ++i) has_f32 = mxu.acc[slot_base + i] != 0.f;
    if (has_f32) fail(SimErrorKind::BadLaunch, "int8 matmul into a slot holding f32 results (pop it first)");
    Eigen::Map<const RowMajorI> w(mxu.weights_i8.data(), d, d);
    Eigen::Map<RowMajorI> acc(mxu.acc_i32.data() + slot_base, kSublanes, d);
    acc.noalias() += lhs * w;
    mxu.slot_is_int[slot] = 1;
  }
}

void Semantics::dma(const isa::Instruction& ins, StepOutcome& out) {
  const auto& o = ins.operands;
  const bool to_vmem = ins.opcode == Opcode::Dmah2v;
  const auto& s = core_.sregs;
  const int64_t vmem = static_cast<uint32_t>(s[o[2]]);
  const int64_t hbm = static_cast<uint32_t>(s[o[3]]);
  const int64_t rows = s[o[4]], row_bytes = s[o[5]], vstride = s[o[6]], hstride = s[o[7]];
  if (rows < 0 || row_bytes < 0 || vstride < 0 || hstride < 0) {
    fail(SimErrorKind::BadLaunch, fmt::format("DMA shape must be non-negative (rows {}, row_bytes {}, strides {}, {})",
                                              rows, row_bytes, vstride, hstride));
  }
  const std::function<std::string()> what = [&] {
    return fmt::format("core {} instruction {} `{}`{}", core_.core_index, pc_, isa::format_instruction(ins), mark_note(core_));
  };
  DmaRecord rec;
  rec.pc = pc_;
  rec.to_vmem = to_vmem;
  rec.sem = o[1];
  if (rows > 0 && row_bytes > 0) {
    rec.vmem = {static_cast<uint64_t>(vmem), uint64_t(rows), uint64_t(row_bytes), uint64_t(vstride)};
    rec.hbm = {static_cast<uint64_t>(hbm), uint64_t(rows), uint64_t(row_bytes), uint64_t(hstride)};
    check_vmem_region(rec.vmem, to_vmem);
    const DmaRecord* conflict = to_vmem ? dmas_.hbm_read_conflict(rec.hbm) : dmas_.hbm_write_conflict(rec.hbm);
    if (conflict) {
      fail(SimErrorKind::Race, fmt::format("HBM range [0x{:x}, 0x{:x}) races the DMA issued by instruction {} that has "
                                           "not been waited for", rec.hbm.lo(), rec.hbm.hi(), conflict->pc));
    }
    for (int64_t r = 0; r < rows; ++r) {
      auto h = window_.view(hbm + r * hstride, row_bytes, what);
      if (options_.timing_only) continue;  // the view above still checked the range
      uint8_t* vm = core_.vmem.get() + vmem + r * vstride;
      if (to_vmem) std::memcpy(vm, h.data(), row_bytes);
      else std::memcpy(h.data(), vm, row_bytes);
    }
    (to_vmem ? out.vmem_write : out.vmem_read) = rec.vmem;
    out.dma_on_chip = window_.on_chip(static_cast<uint64_t>(hbm));
  }
  out.is_dma = true;
  out.dma = rec;
  out.dma_bytes = static_cast<uint64_t>(rows * row_bytes);
}

// The data moves when the DMA issues (as local DMAs do); the sender may not write its source, and
// the receiver may not touch its destination, until the DMA's semaphore on their side is waited
// for: both sides record it as in flight, so either race is reported.
void Semantics::remote_dma(const isa::Instruction& ins, StepOutcome& out) {
  const auto& o = ins.operands;
  const auto& s = core_.sregs;
  const int chip = s[o[3]];
  const uint64_t dst = static_cast<uint32_t>(s[o[4]]), src = static_cast<uint32_t>(s[o[5]]);
  const int64_t bytes = s[o[6]];
  if (!peers_) fail(SimErrorKind::BadLaunch, "dma.remote outside a slice launch (no other chips to reach)");
  if (chip < 0 || chip >= peers_->chip_count() || chip == core_.chip_index) {
    fail(SimErrorKind::BadLaunch, fmt::format("dma.remote to chip {}: the slice has chips 0..{} and this is chip {}", chip,
                                              peers_->chip_count() - 1, core_.chip_index));
  }
  if (bytes < 0) fail(SimErrorKind::BadLaunch, fmt::format("dma.remote of {} bytes", bytes));
  const std::string what = fmt::format("chip {} instruction {} `{}`", core_.chip_index, pc_, isa::format_instruction(ins));
  DmaRecord sent;
  sent.pc = pc_;
  sent.to_vmem = true;  // reads this chip's HBM, as dma.h2v does
  sent.sem = o[1];
  DmaRecord inbound;
  inbound.pc = pc_;
  inbound.to_vmem = false;  // writes the destination's HBM, as dma.v2h does
  inbound.sem = o[2];
  if (bytes > 0) {
    sent.hbm = Region::range(src, src + bytes);
    inbound.hbm = Region::range(dst, dst + bytes);
    if (const DmaRecord* conflict = dmas_.hbm_read_conflict(sent.hbm)) {
      fail(SimErrorKind::Race, fmt::format("HBM range [0x{:x}, 0x{:x}) races the DMA issued by instruction {} that has "
                                           "not been waited for", sent.hbm.lo(), sent.hbm.hi(), conflict->pc));
    }
    const auto from = window_.view(src, bytes, what);
    const auto to = peers_->view(chip, dst, bytes, what + fmt::format(" (destination on chip {})", chip));
    if (!options_.timing_only) std::memcpy(to.data(), from.data(), bytes);
  }
  out.is_dma = true;
  out.dma = sent;
  out.dma_bytes = static_cast<uint64_t>(bytes);
  out.remote_chip = chip;
  out.remote_inbound = inbound;
}

}  // namespace vtpu::sim
