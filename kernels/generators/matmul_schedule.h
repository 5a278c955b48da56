// The matmul's schedule as a value: block shapes, MXU pass pairs, whether A stays resident or B
// is staged, where every buffer lies in VMEM and whether the first column pass's write-backs are
// deferred to the second. All of it is decided from the spec and the chip before any code is
// emitted (SCALE-Sim's fold model plays this role for its arrays), so tests check a schedule
// without a program. Fields carry the names MatmulBuilder, which derives from it, reads.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/codegen/bf16_parts.h"
#include "kernels/generators/matmul_spec.h"
#include "sim/chip_config.h"

namespace vtpu::kernels {

// An epilogue operand's VMEM buffers (one per parity; Row, Column and Scalar operands share one).
// `arg`, `preset_vreg` and `cursor` belong to the code generator.
struct EpilogueBuffer {
  Operand operand;
  int eb = 4;
  int arg = 0;
  uint64_t vmem[2] = {0, 0};
  int preset_vreg = -1;
  int cursor = -1;  // scalar register while draining
};

struct MatmulSchedule {
  // Throws KernelError for a spec the generator does not serve and for buffers that do not fit
  // the chip's kernel VMEM even in the smallest blocks. `overlap_passes`: the schedule may issue the next B panel across a
  // pass and defer the first pass's write-backs (more scalar registers held). `spec` and `chip`
  // must outlive the schedule.
  MatmulSchedule(const MatmulSpec& spec, const sim::ChipConfig& chip, bool overlap_passes);

  const MatmulSpec& spec_;
  const sim::ChipConfig& chip_;
  std::vector<std::pair<int, int>> pairs_;
  std::vector<EpilogueBuffer> epilogue_;
  int64_t d_ = 128, bn_ = 0, bm_ = 0, k_pad_ = 0, kt_ = 0;
  int group_ = 1, mxus_ = 1, eb_a_ = 2, eb_b_ = 2, eb_c_ = 4, a_parts_ = 1, b_parts_ = 1;
  // With more than one pass, every pass but the leading one reads the operands with their
  // non-finite elements as 0 (kernels/codegen/bf16_parts.h): B's panel then holds its part 0 as
  // it is, then the b_parts_ parts of its finite form, b_stored_parts_ in all.
  bool finite_passes_ = false;
  int b_stored_parts_ = 1;
  // With finite_passes_: the finite form of a K slice's LHS rows, [BM, D] f32, stored by the
  // leading pass and loaded by the others.
  uint64_t finite_a_vmem_ = 0;
  bool overlap_passes_ = true;  // the next B panel may stream across a pass, write-backs be deferred
  bool staged_ = false, a_resident_ = false, defer_ = false, panels_ahead_ = false;
  // bf16 B given transposed ([N, K], a Linear weight) lands in the panel as it lies, [BN, Kpad],
  // and the MXUs load it with their transposed weight load (mxu.lw.t), as XLA and Pallas kernels
  // feed a transposed RHS to the MXU at no extra cost (the Pallas TPU matmul guide measures its
  // fused RHS-transpose variant at 6.108 ms against 6.099 ms on v5e, ../shared/REFERENCES.md).
  bool weights_transposed_ = false;
  bool full_size_blocks_ = false;  // see full_size_blocks()
  // Where slice kt's weights for MXU j start in a panel (kt * weight_slice_bytes_ + j *
  // weight_mxu_bytes_) and the VMEM stride between the rows a weight load reads.
  int64_t weight_slice_bytes_ = 0, weight_mxu_bytes_ = 0, weight_stride_ = 0;
  uint64_t a_vmem_[2] = {0, 0}, c_vmem_[2] = {0, 0}, panel_vmem_ = 0, staging_vmem_ = 0;
  uint64_t a_panel_bytes_ = 0, part_bytes_ = 0, staging_bytes_ = 0, c_tile_bytes_ = 0;
  uint64_t a_staging_[2] = {0, 0}, a_stage_pitch_ = 0;  // transposed A: staging per parity, its row pitch
  uint64_t c_deferred_vmem_ = 0;  // with defer_: one C tile per row block
  uint64_t vmem_bytes_ = 0;  // the end of the last buffer: the kernel VMEM the program uses

  // Whether the blocks are as large as the chip allows: the first, largest block shape the
  // constructor tries (every MXU of the core, up to 256 rows) fits, A resident or not. Smaller
  // blocks reload weights more often than the MXUs can hide (kernels/compose/long_k_matmul.h).
  bool full_size_blocks() const { return full_size_blocks_; }

  // Which of the panel's stored weight parts the pass multiplying (A part, B part) loads.
  int weight_part(std::pair<int, int> pass) const { return stored_weight_part(pass, finite_passes_); }

 private:
  void validate();

  // Lays the buffers out for blocks of at most `max_mxus` MXUs' columns and `max_rows` rows, A
  // resident only when `allow_a_resident`; false when they do not fit the kernel VMEM
  // (vmem_bytes_ then says what they need).
  bool plan(int max_mxus, int64_t max_rows, bool allow_a_resident);

  // Whether deferring the first column pass's write-backs to the second shortens the two passes,
  // each estimated as the longer of its MXU cycles and its HBM traffic at full bandwidth (spec
  // M, N and K): the first pass reads A and two B panels, so its C write-backs are what makes it
  // memory-bound; the second then writes two passes' C.
  bool deferral_pays() const;
};

}  // namespace vtpu::kernels
