// See matmul_schedule.h.
#include "kernels/generators/matmul_schedule.h"

#include <fmt/format.h>

#include <algorithm>

#include "kernels/codegen/bf16_parts.h"
#include "kernels/codegen/kernel_error.h"
#include "kernels/codegen/vmem_layout.h"
#include "kernels/codegen/vreg_shape.h"

namespace vtpu::kernels {

MatmulSchedule::MatmulSchedule(const MatmulSpec& spec, const sim::ChipConfig& chip, bool overlap_passes)
    : spec_(spec), chip_(chip), overlap_passes_(overlap_passes) {
  validate();
  // The largest blocks whose buffers fit the kernel VMEM: every MXU of the core and A resident
  // first, then A read per block, fewer rows per block, fewer MXUs per block (each halving the
  // buffers that grow with K: the B panel holds all of K for a block's columns, A's panel all
  // of K for its rows). Under 64 rows a weight load (D cycles) is longer than the block's
  // matmul rows, so halving the MXUs costs less than going below 64 rows, until one is left.
  uint64_t smallest = UINT64_MAX;
  for (int mxus = chip_.mxu_per_core; mxus >= 1; mxus /= 2) {
    for (bool resident : {true, false}) {
      for (int64_t rows = 256; rows >= (mxus == 1 ? kSublanes : 64); rows /= 2) {
        if (plan(mxus, rows, resident)) {
          full_size_blocks_ = mxus == chip_.mxu_per_core && rows == 256;
          return;
        }
        smallest = std::min(smallest, vmem_bytes_);
      }
    }
  }
  throw KernelError(fmt::format("matmul {}x{}x{}: needs {} bytes of VMEM even in its smallest blocks (8 rows, one MXU), {} has {}",
                                spec_.m, spec_.n, spec_.k, smallest, chip_.name, chip_.kernel_vmem_bytes()));
}

void MatmulSchedule::validate() {
  const auto& s = spec_;
  if (s.batch < 1 || s.m < 1 || s.n < 1 || s.k < 1) throw KernelError("matmul: every dimension must be at least 1");
  for (DType t : {s.a_dtype, s.b_dtype}) {
    if (!dtype_is_float(t)) {
      throw KernelError(fmt::format("matmul: {} operands are not supported (f32, bf16 or f16)", dtype_name(t)));
    }
  }
  if (!dtype_is_float(s.out_dtype)) throw KernelError("matmul: the output is f32, bf16 or f16");
  if (s.epilogue && s.epilogue->outputs().size() != 1) throw KernelError("matmul: the epilogue has exactly one output");
  if (s.epilogue && s.epilogue->operand_count() > 1 + static_cast<int>(s.epilogue_inputs.size())) {
    throw KernelError("matmul: the epilogue reads an operand that has no input");
  }
  for (const auto& o : s.epilogue_inputs) {
    if (!dtype_on_chip(o.dtype)) throw KernelError(fmt::format("matmul: {} epilogue input not supported", dtype_name(o.dtype)));
  }
  if (s.batch * s.m * std::max(s.n, s.k) >= (int64_t{1} << 31) || s.batch * s.k * s.n >= (int64_t{1} << 31)) {
    throw KernelError("matmul: operands too large for one launch");
  }
  pairs_ = mxu_pass_pairs(s.passes);
}

bool MatmulSchedule::plan(int max_mxus, int64_t max_rows, bool allow_a_resident) {
  const auto& s = spec_;
  d_ = chip_.mxu_dim;
  group_ = d_ / kLanes;
  bn_ = std::min<int64_t>(int64_t{max_mxus} * d_, round_up(s.n, d_));
  mxus_ = static_cast<int>(bn_ / d_);
  bm_ = std::min<int64_t>({max_rows, round_up(s.m, kSublanes), int64_t{chip_.mxu_acc_slots} / 2 * kSublanes});
  epilogue_.clear();
  defer_ = false;
  k_pad_ = round_up(s.k, d_);
  kt_ = k_pad_ / d_;
  eb_a_ = dtype_bytes(s.a_dtype);
  eb_b_ = dtype_bytes(s.b_dtype);
  eb_c_ = dtype_bytes(s.out_dtype);
  a_parts_ = bf16_part_count(s.a_dtype, s.passes);
  b_parts_ = bf16_part_count(s.b_dtype, s.passes);
  std::erase_if(pairs_, [&](auto p) { return p.first >= a_parts_ || p.second >= b_parts_; });
  finite_passes_ = has_finite_passes(pairs_);
  b_stored_parts_ = stored_weight_parts(b_parts_, finite_passes_);
  // Passes grouped by weight part: a K slice then loads each weight part once (4 loads, not 6,
  // at 'highest'), and a weight load costs more than a small block's matmul rows. The f32
  // accumulator sums the same terms, in another order.
  std::stable_sort(pairs_.begin(), pairs_.end(), [&](auto x, auto y) { return weight_part(x) < weight_part(y); });
  // A bf16 B is loaded as it lands unless its finite form is needed: that one is made on the
  // vector unit, as f32 and f16 B are split into parts.
  weights_transposed_ = s.b_dtype == DType::BF16 && s.b_transposed && !finite_passes_;
  staged_ = s.b_dtype != DType::BF16 || (s.b_transposed && !weights_transposed_) || finite_passes_;
  panels_ahead_ = overlap_passes_ && s.batch == 1 && s.n > bn_ && chip_.dma_queues >= 3;  // a second column block, a third queue

  VmemLayout vmem_layout;
  const uint64_t vmem = chip_.kernel_vmem_bytes();
  const uint64_t a_all = uint64_t(round_up(s.m, bm_)) * k_pad_ * eb_a_;
  a_resident_ = allow_a_resident && s.batch == 1 && a_all <= vmem / 3 && !s.a_transposed;
  a_panel_bytes_ = uint64_t(bm_) * k_pad_ * eb_a_;
  a_vmem_[0] = vmem_layout.place(a_resident_ ? a_all : a_panel_bytes_);
  a_vmem_[1] = a_resident_ ? a_vmem_[0] : vmem_layout.place(a_panel_bytes_);
  if (finite_passes_) finite_a_vmem_ = vmem_layout.place(uint64_t(bm_) * d_ * 4);
  part_bytes_ = uint64_t(k_pad_) * bn_ * 2;
  weight_slice_bytes_ = weights_transposed_ ? d_ * 2 : d_ * bn_ * 2;
  weight_mxu_bytes_ = weights_transposed_ ? d_ * k_pad_ * 2 : d_ * 2;
  weight_stride_ = weights_transposed_ ? k_pad_ * 2 : bn_ * 2;
  panel_vmem_ = vmem_layout.place(2 * b_stored_parts_ * part_bytes_);
  staging_bytes_ = s.b_transposed ? uint64_t(bn_) * k_pad_ * eb_b_ : uint64_t(k_pad_) * bn_ * eb_b_;
  if (staged_) staging_vmem_ = vmem_layout.place(2 * staging_bytes_);
  if (s.a_transposed) {  // a block's A^T, [Kpad, BM rounded up to whole 128-lane blocks], per parity
    a_stage_pitch_ = round_up(bm_, kLanes) * eb_a_;
    for (auto& at : a_staging_) at = vmem_layout.place(uint64_t(k_pad_) * a_stage_pitch_);
  }
  c_tile_bytes_ = uint64_t(bm_) * bn_ * eb_c_;
  c_vmem_[0] = vmem_layout.place(c_tile_bytes_);
  c_vmem_[1] = vmem_layout.place(c_tile_bytes_);
  for (size_t i = 0; i < s.epilogue_inputs.size(); ++i) {
    EpilogueBuffer e;
    e.operand = s.epilogue_inputs[i];
    e.eb = dtype_bytes(e.operand.dtype);
    const uint64_t pad = uint64_t(kLanes) * e.eb;
    switch (e.operand.layout) {
      case Layout::Full: e.vmem[0] = vmem_layout.place(uint64_t(bm_) * bn_ * e.eb); e.vmem[1] = vmem_layout.place(uint64_t(bm_) * bn_ * e.eb); break;
      case Layout::Row: e.vmem[0] = e.vmem[1] = vmem_layout.place(uint64_t(round_up(s.n, bn_)) * e.eb + pad); break;
      case Layout::Column: e.vmem[0] = e.vmem[1] = vmem_layout.place(uint64_t(round_up(s.m, bm_)) * e.eb + pad); break;
      case Layout::Scalar: e.vmem[0] = e.vmem[1] = vmem_layout.place(pad); break;
      case Layout::Periodic: throw KernelError("matmul: periodic epilogue operands are not supported (materialise them)");
    }
    epilogue_.push_back(e);
  }
  const uint64_t deferred_bytes = uint64_t(round_up(s.m, bm_) / bm_) * c_tile_bytes_;
  if (deferral_pays() && vmem_layout.end() + deferred_bytes <= vmem) {
    defer_ = true;
    c_deferred_vmem_ = vmem_layout.place(deferred_bytes);
  }
  vmem_bytes_ = vmem_layout.end();
  return vmem_bytes_ <= vmem;
}

// Whether deferring the first column pass's write-backs to the second shortens the two passes,
// each estimated as the longer of its MXU cycles and its HBM traffic at full bandwidth (spec
// M, N and K): the first pass reads A and two B panels, so its C write-backs are what makes it
// memory-bound; the second then writes two passes' C.
bool MatmulSchedule::deferral_pays() const {
  const auto& s = spec_;
  if (!overlap_passes_ || !a_resident_ || s.batch != 1 || s.n <= bn_) return false;
  const double per_cycle = chip_.hbm_bytes_per_cycle();
  const double rows = double(round_up(s.m, bm_) / bm_);
  const double compute = rows * double(bm_ / kSublanes) * chip_.mxu_push_cycles * kt_ * pairs_.size();
  const double a = double(s.m) * s.k * eb_a_ / per_cycle, panel = double(s.k) * bn_ * eb_b_ / per_cycle;
  const double c = rows * double(c_tile_bytes_) / per_cycle;
  const double now = std::max(compute, a + 2 * panel + c) + std::max(compute, panel + c);
  const double deferred = std::max(compute, a + 2 * panel) + std::max(compute, panel + 2 * c);
  return deferred < now;
}

}  // namespace vtpu::kernels
