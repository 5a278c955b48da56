// Functional (architectural) state of one TensorCore: registers, VMEM, MXU weights and
// accumulators, program counter. No timing lives here; see timing_model.h.
#pragma once

#include <array>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "isa/opcode.h"
#include "sim/vmem_pool.h"

namespace vtpu::sim {

inline constexpr int kLanes = 128;
inline constexpr int kSublanes = 8;
inline constexpr int kVregElements = kLanes * kSublanes;

using VReg = std::array<float, kVregElements>;  // 32-bit containers; int ops reinterpret the bits
using MaskReg = std::array<uint8_t, kVregElements>;

// Exponent fields (biased; a subnormal counts as 1) of a set of values, over its non-zero ones,
// and whether each is a finite bf16 value: enough to tell whether products are exact in f32
// (sim/mxu_product.cc).
struct ExponentRange {
  uint32_t min = 255, max = 0;
  bool finite_bf16 = true;
};

struct MxuState {
  int dim = 128, slots = 0;
  std::vector<float> weights;        // dim x dim, row-major W[k][n], bf16 values widened to f32
  std::vector<float> back_weights;   // the other bf16 buffer: mxu.lwb fills it, mxu.swap exchanges
  std::vector<int32_t> weights_i8;   // dim x dim int8 values widened
  std::vector<float> acc;            // slots x 8 x dim
  std::vector<int32_t> acc_i32;      // slots x 8 x dim
  std::vector<uint8_t> slot_is_int;  // last accumulation mode of each slot
  // f32 pushes not multiplied yet, against the current weights: their rows (8 x dim each, rounded
  // to bf16) and slots. Multiplied together (sim/mxu_product.h) before an accumulator is read or
  // these weights are replaced, so the host runs one large product instead of many small ones.
  std::vector<float> pending_rows;
  std::vector<int> pending_slots;
  std::vector<float> pending_sums;  // scratch for their products, kept between batches
  std::optional<ExponentRange> weights_range;  // of `weights`, found at their first product

  // Sized (zeroed) on first use: several MB per launch on a 256-wide MXU, which a launch that
  // never touches the MXU (most of them) should not pay for.
  void materialize() {
    if (!weights.empty()) return;
    const size_t square = size_t(dim) * dim, accumulators = size_t(slots) * kSublanes * dim;
    weights.assign(square, 0.f);
    back_weights.assign(square, 0.f);
    weights_i8.assign(square, 0);
    acc.assign(accumulators, 0.f);
    acc_i32.assign(accumulators, 0);
    slot_is_int.assign(slots, 0);
  }
};

// The vector registers, each zeroed when first used: a launch starts with all of them zero, but
// most kernels use a few, and zeroing all 128 KiB up front was a tenth of an eager op's host time.
class VectorRegisters {
 public:
  VReg& operator[](size_t r) {
    if (!(zeroed_ >> r & 1)) {
      regs_[r].fill(0.f);
      zeroed_ |= uint64_t{1} << r;
    }
    return regs_[r];
  }

 private:
  static_assert(isa::kVectorRegs <= 64, "one bit of zeroed_ per register");
  std::array<VReg, isa::kVectorRegs> regs_;  // left uninitialised: each is zeroed at first use
  uint64_t zeroed_ = 0;
};

struct CoreState {
  int core_index = 0;
  int core_count = 1;  // TensorCores running the launch
  int chip_index = 0;  // in a slice launch (sim/slice_launch.h)
  int chip_count = 1;
  std::array<int32_t, isa::kScalarRegs> sregs{};
  VectorRegisters vregs;
  std::array<MaskReg, isa::kMaskRegs> masks{};
  VmemBuffer vmem;                // zeroed at the start of a launch
  uint64_t vmem_bytes = 0;
  VmemDirtyPages vmem_dirty;      // the pages written so far
  std::vector<uint8_t> vmem_written;           // one flag per 4-byte word, when uninitialised reads are checked
  std::vector<MxuState> mxus;
  std::optional<int32_t> mark;    // the last `mark` operand: where errors say the core was

  // `zeroed` is a zeroed VMEM of vmem_size bytes (a fresh one when null).
  CoreState(uint64_t vmem_size, int mxu_count, int mxu_dim, int acc_slots, bool track_init, VmemBuffer zeroed = nullptr)
      : vmem(zeroed ? std::move(zeroed) : zeroed_vmem(vmem_size)), vmem_bytes(vmem_size) {
    if (track_init) vmem_written.assign(vmem_size / 4, 0);
    masks[0].fill(1);
    for (int i = 0; i < mxu_count; ++i) {
      MxuState m;
      m.dim = mxu_dim;
      m.slots = acc_slots;
      mxus.push_back(std::move(m));
    }
  }

  MxuState& mxu(int index) {
    MxuState& m = mxus.at(index);
    m.materialize();
    return m;
  }
};

// " (after mark N)" once the core has run a `mark`, else nothing: appended to where an error is.
inline std::string mark_note(const CoreState& core) {
  return core.mark ? " (after mark " + std::to_string(*core.mark) + ")" : std::string();
}

}  // namespace vtpu::sim
