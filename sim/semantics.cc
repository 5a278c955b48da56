// One case per opcode for the scalar, branch, vector, transcendental and cross-lane units. Helpers
// keep each case to a line or two; the heavy cases (vector load/store, MXU, DMA) have their own
// functions in semantics_memory.cc.
#include "sim/semantics.h"

#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <cstring>

#include "isa/disassembler.h"
#include "isa/instruction_info.h"
#include "isa/verifier.h"
#include "sim/bf16.h"
#include "sim/data_dependence.h"
#include "sim/f16.h"
#include "sim/mxu_product.h"
#include "sim/sim_error.h"

namespace vtpu::sim {
namespace {

using isa::Opcode;

template <typename F>
void map1(VReg& d, const VReg& a, F f) {
  for (int i = 0; i < kVregElements; ++i) d[i] = f(a[i]);
}
template <typename F>
void map2(VReg& d, const VReg& a, const VReg& b, F f) {
  for (int i = 0; i < kVregElements; ++i) d[i] = f(a[i], b[i]);
}
template <typename F>
void imap2(VReg& d, const VReg& a, const VReg& b, F f) {
  for (int i = 0; i < kVregElements; ++i) {
    d[i] = std::bit_cast<float>(f(std::bit_cast<int32_t>(a[i]), std::bit_cast<int32_t>(b[i])));
  }
}
template <typename F>
void compare(MaskReg& m, const VReg& a, const VReg& b, F f) {
  for (int i = 0; i < kVregElements; ++i) m[i] = f(a[i], b[i]) ? 1 : 0;
}

// The instructions that only compute values: vector arithmetic and MXU results. A timing-only
// run skips them, except where no data flows in (sim/data_dependence.h: lane indices, masks from
// counts), since masks set the regions loads and stores touch.
bool only_computes_values(Opcode op) {
  if (op == Opcode::Mxswap || op == Opcode::Mxpop) return true;
  const isa::Unit unit = isa::info(op).unit;
  return unit == isa::Unit::Vpu || unit == isa::Unit::Transc || unit == isa::Unit::Xlane;
}

float nan_max(float a, float b) { return (std::isnan(a) || std::isnan(b)) ? NAN : std::max(a, b); }
float nan_min(float a, float b) { return (std::isnan(a) || std::isnan(b)) ? NAN : std::min(a, b); }

// Pairwise (tree) sum, the order a hardware reduction tree uses.
float tree_sum(float* values, int n) {
  for (int width = n / 2; width >= 1; width /= 2) {
    for (int i = 0; i < width; ++i) values[i] = values[i] + values[i + width];
  }
  return values[0];
}

int32_t f32_to_i32_trunc(float v) {
  if (std::isnan(v)) return 0;
  if (v >= 2147483648.0f) return INT32_MAX;
  if (v < -2147483648.0f) return INT32_MIN;
  return static_cast<int32_t>(v);
}

}  // namespace

void Semantics::fail(SimErrorKind kind, const std::string& message, int trap_code) const {
  throw SimError(kind, fmt::format("core {} instruction {} `{}`{}: {}", core_.core_index, pc_,
                                   isa::format_instruction(*current_), mark_note(core_), message), trap_code);
}

void Semantics::check_vmem(uint64_t lo, uint64_t hi, bool write) const {
  check_vmem_region(Region::range(lo, hi), write);
}

void Semantics::check_vmem_region(const Region& region, bool write) const {
  const uint64_t lo = region.lo(), hi = region.hi();
  if (hi > core_.vmem_bytes || lo > hi) {
    fail(SimErrorKind::OutOfBounds,
         fmt::format("VMEM {} [{}, {}) outside VMEM [0, {})", write ? "write" : "read", lo, hi, core_.vmem_bytes));
  }
  // What the pool zeroes again; a timing-only run writes no VMEM bytes.
  if (write && !options_.timing_only) core_.vmem_dirty.mark(lo, hi);
  const DmaRecord* conflict = write ? dmas_.vmem_write_conflict(region) : dmas_.vmem_read_conflict(region);
  if (conflict) {
    fail(SimErrorKind::Race,
         fmt::format("VMEM {} [{}, {}) races the DMA issued by instruction {} (VMEM [{}, {}), sem{}) that has not "
                     "been waited for",
                     write ? "write" : "read", lo, hi, conflict->pc, conflict->vmem.lo(), conflict->vmem.hi(),
                     conflict->sem));
  }
  if (!core_.vmem_written.empty() && region.rows > 1) {
    for (uint64_t r = 0; r < region.rows; ++r) {
      const uint64_t row = region.base + r * region.stride;
      mark_or_check_init(row, row + region.row_bytes, write);
    }
    return;
  }
  mark_or_check_init(lo, hi, write);
}

void Semantics::mark_or_check_init(uint64_t lo, uint64_t hi, bool write) const {
  if (!core_.vmem_written.empty()) {
    if (write) {
      for (uint64_t w = lo / 4; w < (hi + 3) / 4; ++w) core_.vmem_written[w] = 1;
    } else {
      for (uint64_t w = lo / 4; w < (hi + 3) / 4; ++w) {
        if (!core_.vmem_written[w]) {
          fail(SimErrorKind::Uninitialized, fmt::format("read of uninitialised VMEM at address {}", w * 4));
        }
      }
    }
  }
}

StepOutcome Semantics::step(const isa::Instruction& ins, size_t pc) {
  current_ = &ins;
  pc_ = pc;
  StepOutcome out;
  out.next_pc = pc + 1;
  auto& s = core_.sregs;
  auto& v = core_.vregs;
  auto& m = core_.masks;
  const auto& o = ins.operands;
  const auto u32 = [](int32_t x) { return static_cast<uint32_t>(x); };
  const auto wrap = [](uint32_t x) { return static_cast<int32_t>(x); };
  const auto branch = [&](bool taken, int target) {
    if (taken) {
      out.next_pc = static_cast<size_t>(target);
      out.branch_taken = true;
    }
  };
  if (options_.timing_only && only_computes_values(ins.opcode) && !flow_.computes_untainted[pc]) {
    // A mask from data enables every lane: the widest region a load or store under it could
    // touch (such programs are flagged as depending on data).
    if (is_comparison(ins.opcode)) m[o[0]].fill(1);
    return out;
  }
  switch (ins.opcode) {
    case Opcode::Sli: s[o[0]] = o[1]; break;
    case Opcode::Smov: s[o[0]] = s[o[1]]; break;
    case Opcode::Sadd: s[o[0]] = wrap(u32(s[o[1]]) + u32(s[o[2]])); break;
    case Opcode::Saddi: s[o[0]] = wrap(u32(s[o[1]]) + u32(o[2])); break;
    case Opcode::Ssub: s[o[0]] = wrap(u32(s[o[1]]) - u32(s[o[2]])); break;
    case Opcode::Smul: s[o[0]] = wrap(u32(s[o[1]]) * u32(s[o[2]])); break;
    case Opcode::Smuli: s[o[0]] = wrap(u32(s[o[1]]) * u32(o[2])); break;
    case Opcode::Sdiv:
    case Opcode::Srem: {
      if (s[o[2]] == 0) fail(SimErrorKind::Arithmetic, "scalar division by zero");
      const bool overflow = s[o[1]] == INT32_MIN && s[o[2]] == -1;
      if (ins.opcode == Opcode::Sdiv) s[o[0]] = overflow ? INT32_MIN : s[o[1]] / s[o[2]];
      else s[o[0]] = overflow ? 0 : s[o[1]] % s[o[2]];
      break;
    }
    case Opcode::Sand: s[o[0]] = s[o[1]] & s[o[2]]; break;
    case Opcode::Sor: s[o[0]] = s[o[1]] | s[o[2]]; break;
    case Opcode::Sxor: s[o[0]] = s[o[1]] ^ s[o[2]]; break;
    case Opcode::Sshli: s[o[0]] = wrap(u32(s[o[1]]) << o[2]); break;
    case Opcode::Sshri: s[o[0]] = wrap(u32(s[o[1]]) >> o[2]); break;
    case Opcode::Smin: s[o[0]] = std::min(s[o[1]], s[o[2]]); break;
    case Opcode::Smax: s[o[0]] = std::max(s[o[1]], s[o[2]]); break;
    case Opcode::Sslt: s[o[0]] = s[o[1]] < s[o[2]] ? 1 : 0; break;
    case Opcode::Sarg:
      if (o[1] >= static_cast<int>(args_.size())) fail(SimErrorKind::BadLaunch, "argument index out of range");
      s[o[0]] = args_[o[1]];
      break;
    case Opcode::Sargw: args_[o[0]] = s[o[1]]; break;
    case Opcode::Score: s[o[0]] = core_.core_index; break;
    case Opcode::Sncore: s[o[0]] = core_.core_count; break;
    case Opcode::Schip: s[o[0]] = core_.chip_index; break;
    case Opcode::Snchip: s[o[0]] = core_.chip_count; break;
    case Opcode::Sld: {
      const int64_t at = int64_t{static_cast<uint32_t>(s[o[1]])} + o[2];
      if (at % 4 != 0) fail(SimErrorKind::Misaligned, fmt::format("address {} not aligned to 4 bytes", at));
      if (at < 0) fail(SimErrorKind::OutOfBounds, fmt::format("VMEM read at negative address {}", at));
      check_vmem(static_cast<uint64_t>(at), static_cast<uint64_t>(at) + 4, false);
      std::memcpy(&s[o[0]], core_.vmem.get() + at, 4);
      out.vmem_read = Region::range(static_cast<uint64_t>(at), static_cast<uint64_t>(at) + 4);
      break;
    }
    case Opcode::Nop: break;
    case Opcode::Mark: core_.mark = out.mark = s[o[0]]; break;
    case Opcode::Blt: branch(s[o[0]] < s[o[1]], o[2]); break;
    case Opcode::Bge: branch(s[o[0]] >= s[o[1]], o[2]); break;
    case Opcode::Beq: branch(s[o[0]] == s[o[1]], o[2]); break;
    case Opcode::Bne: branch(s[o[0]] != s[o[1]], o[2]); break;
    case Opcode::Jmp: branch(true, o[0]); break;
    case Opcode::Halt: out.halt = true; break;
    case Opcode::Trap: fail(SimErrorKind::Trap, fmt::format("trap #{}: the program refused its launch arguments", o[0]), o[0]); break;

    case Opcode::Vadd: map2(v[o[0]], v[o[1]], v[o[2]], [](float a, float b) { return a + b; }); break;
    case Opcode::Vsub: map2(v[o[0]], v[o[1]], v[o[2]], [](float a, float b) { return a - b; }); break;
    case Opcode::Vmul: map2(v[o[0]], v[o[1]], v[o[2]], [](float a, float b) { return a * b; }); break;
    case Opcode::Vdiv: map2(v[o[0]], v[o[1]], v[o[2]], [](float a, float b) { return a / b; }); break;
    case Opcode::Vmax: map2(v[o[0]], v[o[1]], v[o[2]], nan_max); break;
    case Opcode::Vmin: map2(v[o[0]], v[o[1]], v[o[2]], nan_min); break;
    case Opcode::Vfma: {
      // Each register looked up once: a lookup tests whether the register was zeroed yet.
      const VReg &a = v[o[1]], &b = v[o[2]], &c = v[o[3]];
      VReg r;
      for (int i = 0; i < kVregElements; ++i) r[i] = std::fma(a[i], b[i], c[i]);
      v[o[0]] = r;
      break;
    }
    case Opcode::Vabs: map1(v[o[0]], v[o[1]], [](float a) { return std::fabs(a); }); break;
    case Opcode::Vneg: map1(v[o[0]], v[o[1]], [](float a) { return -a; }); break;
    case Opcode::Vmov: v[o[0]] = v[o[1]]; break;
    case Opcode::Vbcast: v[o[0]].fill(std::bit_cast<float>(s[o[1]])); break;
    case Opcode::Viadd: imap2(v[o[0]], v[o[1]], v[o[2]], [](int32_t a, int32_t b) {
        return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b)); }); break;
    case Opcode::Vimul: imap2(v[o[0]], v[o[1]], v[o[2]], [](int32_t a, int32_t b) {
        return static_cast<int32_t>(static_cast<uint32_t>(a) * static_cast<uint32_t>(b)); }); break;
    case Opcode::Viota: {
      VReg& d = v[o[0]];
      for (int i = 0; i < kVregElements; ++i) d[i] = std::bit_cast<float>(i);
      break;
    }
    case Opcode::Vand: imap2(v[o[0]], v[o[1]], v[o[2]], [](int32_t a, int32_t b) { return a & b; }); break;
    case Opcode::Vxor: imap2(v[o[0]], v[o[1]], v[o[2]], [](int32_t a, int32_t b) { return a ^ b; }); break;
    case Opcode::Vshri: {
      const int shift = o[2];
      if (shift >= 32) fail(SimErrorKind::BadLaunch, fmt::format("shift {} is not below 32", shift));
      imap2(v[o[0]], v[o[1]], v[o[1]], [shift](int32_t a, int32_t) {
        return static_cast<int32_t>(static_cast<uint32_t>(a) >> shift); });
      break;
    }
    case Opcode::Vimulhu: imap2(v[o[0]], v[o[1]], v[o[2]], [](int32_t a, int32_t b) {
        return static_cast<int32_t>((uint64_t{static_cast<uint32_t>(a)} * static_cast<uint32_t>(b)) >> 32); }); break;
    case Opcode::Vcmplt: compare(m[o[0]], v[o[1]], v[o[2]], [](float a, float b) { return a < b; }); break;
    case Opcode::Vcmple: compare(m[o[0]], v[o[1]], v[o[2]], [](float a, float b) { return a <= b; }); break;
    case Opcode::Vcmpeq: compare(m[o[0]], v[o[1]], v[o[2]], [](float a, float b) { return a == b; }); break;
    case Opcode::Vcmpne: compare(m[o[0]], v[o[1]], v[o[2]], [](float a, float b) { return a != b; }); break;
    case Opcode::Vicmplt: compare(m[o[0]], v[o[1]], v[o[2]], [](float a, float b) {
        return std::bit_cast<int32_t>(a) < std::bit_cast<int32_t>(b); }); break;
    case Opcode::Vmaskn:
      for (int i = 0; i < kVregElements; ++i) m[o[0]][i] = i < s[o[1]] ? 1 : 0;
      break;
    case Opcode::Mand:
      for (int i = 0; i < kVregElements; ++i) m[o[0]][i] = m[o[1]][i] & m[o[2]][i];
      break;
    case Opcode::Mnot:
      for (int i = 0; i < kVregElements; ++i) m[o[0]][i] = !m[o[1]][i];
      break;
    case Opcode::Vsel: {
      const VReg &a = v[o[2]], &b = v[o[3]];
      const MaskReg& mask = m[o[1]];
      VReg r;
      // Selected by bits, without a branch per lane, so the loop runs on the host's vector units.
      for (int i = 0; i < kVregElements; ++i) {
        const uint32_t pick_a = 0u - static_cast<uint32_t>(mask[i] != 0);
        r[i] = std::bit_cast<float>((std::bit_cast<uint32_t>(a[i]) & pick_a) | (std::bit_cast<uint32_t>(b[i]) & ~pick_a));
      }
      v[o[0]] = r;
      break;
    }
    case Opcode::Vcvtbf: map1(v[o[0]], v[o[1]], round_to_bf16); break;
    case Opcode::Vcvth: map1(v[o[0]], v[o[1]], round_to_f16); break;
    case Opcode::Vcvtf2i: map1(v[o[0]], v[o[1]], [](float a) { return std::bit_cast<float>(f32_to_i32_trunc(a)); }); break;
    case Opcode::Vcvti2f: map1(v[o[0]], v[o[1]], [](float a) { return static_cast<float>(std::bit_cast<int32_t>(a)); }); break;
    case Opcode::Vcvti8: map1(v[o[0]], v[o[1]], [](float a) {
        return std::bit_cast<float>(std::clamp(std::bit_cast<int32_t>(a), -128, 127)); }); break;
    case Opcode::Vexp: map1(v[o[0]], v[o[1]], [](float a) { return std::exp(a); }); break;
    case Opcode::Vlog: map1(v[o[0]], v[o[1]], [](float a) { return std::log(a); }); break;
    case Opcode::Vtanh: map1(v[o[0]], v[o[1]], [](float a) { return std::tanh(a); }); break;
    case Opcode::Vrsqrt: map1(v[o[0]], v[o[1]], [](float a) { return 1.0f / std::sqrt(a); }); break;
    case Opcode::Vrcp: map1(v[o[0]], v[o[1]], [](float a) { return 1.0f / a; }); break;

    case Opcode::Vredsuml: case Opcode::Vredmaxl: case Opcode::Vredminl: {
      const VReg& a = v[o[1]];
      VReg r;
      for (int sl = 0; sl < kSublanes; ++sl) {
        const float* row = &a[sl * kLanes];
        float value;
        if (ins.opcode == Opcode::Vredsuml) {
          float tmp[kLanes];
          std::memcpy(tmp, row, sizeof tmp);
          value = tree_sum(tmp, kLanes);
        } else {
          value = row[0];
          for (int l = 1; l < kLanes; ++l) value = ins.opcode == Opcode::Vredmaxl ? nan_max(value, row[l]) : nan_min(value, row[l]);
        }
        std::fill(&r[sl * kLanes], &r[sl * kLanes] + kLanes, value);
      }
      v[o[0]] = r;
      break;
    }
    case Opcode::Vredsums: case Opcode::Vredmaxs: {
      const VReg& a = v[o[1]];
      VReg r;
      for (int l = 0; l < kLanes; ++l) {
        float col[kSublanes];
        for (int sl = 0; sl < kSublanes; ++sl) col[sl] = a[sl * kLanes + l];
        float value = col[0];
        if (ins.opcode == Opcode::Vredsums) value = tree_sum(col, kSublanes);
        else for (int sl = 1; sl < kSublanes; ++sl) value = nan_max(value, col[sl]);
        for (int sl = 0; sl < kSublanes; ++sl) r[sl * kLanes + l] = value;
      }
      v[o[0]] = r;
      break;
    }
    case Opcode::Vbcastl: {
      const VReg& a = v[o[1]];
      VReg r;
      for (int sl = 0; sl < kSublanes; ++sl) std::fill(&r[sl * kLanes], &r[sl * kLanes] + kLanes, a[sl * kLanes + o[2]]);
      v[o[0]] = r;
      break;
    }
    case Opcode::Vbcasts: {
      VReg r;
      for (int sl = 0; sl < kSublanes; ++sl) std::memcpy(&r[sl * kLanes], &v[o[1]][o[2] * kLanes], kLanes * sizeof(float));
      v[o[0]] = r;
      break;
    }
    case Opcode::Vtrans: {
      // Row r of the 128x128 block lives in vreg base + r/8, sublane r%8.
      std::array<const VReg*, isa::kVBlockRegs> from;
      for (int i = 0; i < isa::kVBlockRegs; ++i) from[i] = &v[o[1] + i];
      std::array<VReg, isa::kVBlockRegs> r;
      for (int row = 0; row < kLanes; ++row) {
        const float* source_row = &(*from[row / kSublanes])[(row % kSublanes) * kLanes];
        for (int col = 0; col < kLanes; ++col) r[col / kSublanes][(col % kSublanes) * kLanes + row] = source_row[col];
      }
      for (int i = 0; i < isa::kVBlockRegs; ++i) v[o[0] + i] = r[i];
      break;
    }
    case Opcode::Vld: case Opcode::Vldbf: case Opcode::Vldh: case Opcode::Vldi8: case Opcode::Vldu8:
      vector_load(ins, out);
      break;
    case Opcode::Vst: case Opcode::Vstbf: case Opcode::Vsth: case Opcode::Vsti8: vector_store(ins, out); break;
    case Opcode::Mxlw: case Opcode::Mxlwi8: case Opcode::Mxlwb: case Opcode::Mxlwt: case Opcode::Mxlwbt:
      mxu_load_weights(ins, out);
      break;
    case Opcode::Mxswap: switch_mxu_weights(core_.mxu(o[0])); break;
    case Opcode::Mxmm: case Opcode::Mxmmi8: mxu_matmul(ins, out); break;
    case Opcode::Mxpop: {
      MxuState& mxu = core_.mxu(o[1]);
      run_pending_mxu_pushes(mxu);
      const int group = mxu.dim / kLanes;
      const size_t slot_base = size_t(o[2]) * kSublanes * mxu.dim;
      const bool is_int = mxu.slot_is_int[o[2]];
      for (int g = 0; g < group; ++g) {
        VReg& dst = v[o[0] + g];
        for (int sl = 0; sl < kSublanes; ++sl) {
          const size_t first = slot_base + size_t(sl) * mxu.dim + g * kLanes;
          // A register holds the slot's bits either way: an int32 sum is stored as its bits.
          if (is_int) std::memcpy(&dst[sl * kLanes], &mxu.acc_i32[first], kLanes * sizeof(float));
          else std::memcpy(&dst[sl * kLanes], &mxu.acc[first], kLanes * sizeof(float));
        }
      }
      std::fill_n(mxu.acc.begin() + slot_base, kSublanes * mxu.dim, 0.f);
      std::fill_n(mxu.acc_i32.begin() + slot_base, kSublanes * mxu.dim, 0);
      mxu.slot_is_int[o[2]] = 0;
      break;
    }
    case Opcode::Dmah2v: case Opcode::Dmav2h: dma(ins, out); break;
    case Opcode::Dmaremote: remote_dma(ins, out); break;
    case Opcode::Semwait: case Opcode::Semsig: break;  // synchronisation is the executor's (needs time)
  }
  return out;
}

}  // namespace vtpu::sim
