// Per 8-row group (one row per sublane), a row kernel makes one to three passes over the row's
// 128-column chunks: pass 1 evaluates the prologue, keeps the values in an f32 scratch row and
// accumulates the first statistic; later passes read the scratch back. Lanes past the end of a
// ragged row are replaced by the reduction's identity before they are accumulated, so padding
// never leaks into a statistic. Cross-lane reductions (vredsum.lane / vredmax.lane) finish each
// statistic with one value per sublane, i.e. per row.
//
// The builder is one class: the block and chunk loops, prologue and scratch row in rowwise.cc,
// the ops' passes (reductions, softmax, norms) in rowwise_ops.cc. Internal to
// kernels/generators: include rowwise.h instead.
#pragma once

#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <limits>
#include <optional>

#include "isa/program.h"
#include "kernels/codegen/asm_writer.h"
#include "kernels/codegen/block_stream.h"
#include "kernels/codegen/tile_codegen.h"
#include "kernels/codegen/vreg_shape.h"
#include "kernels/generators/row_spec.h"
#include "sim/chip_config.h"

namespace vtpu::kernels::rowwise_detail {

inline constexpr uint64_t kBlockBudgetBytes = 512 * 1024;
inline constexpr int64_t kRowUnroll = 4;  // chunks per chunk-loop iteration (RowwiseBuilder::chunk_unroll)

class RowwiseBuilder {
 public:
  // `hoist_tail_masks`: the ragged last iteration's masks are computed once per kernel (the
  // row length is a launch constant) instead of in every row group; it takes unroll mask
  // registers, so a prologue that then runs out of them is generated again without.
  RowwiseBuilder(const RowwiseSpec& spec, const sim::ChipConfig& chip, bool hoist_tail_masks)
      : spec_(spec), chip_(chip), w_(fmt::format("row_{}", row_op_name(spec.op))), hoist_tail_masks_(hoist_tail_masks) {}

  isa::Program build();

 private:
  static int add(std::vector<StreamOperand>& v, StreamOperand o);

  void validate();

  // m_lane0: lane 0 of every sublane (per-row results are stored from there); v_lane: the lane
  // index of each element, for masking ragged chunks.
  void prepare_masks();

  // Emits a loop over the row chunks of the current group, chunk_unroll() chunks per iteration.
  // `body(cursors)` emits one chunk: `tile` chunks past the cursors, which advance by whole
  // iterations. s`remaining` counts down from cols at the iteration's first chunk. Passes that
  // mask their tails give the identity to fill it with; only the last, partial iteration masks.
  struct Cursors {
    const BlockStream* stream = nullptr;
    std::vector<int> operand;  // per stream operand (Full/Row), -1 otherwise
    int scratch = -1;  // the scratch row's cursor (ops that keep one: needs_scratch)
    int remaining;
    int64_t tile = 0;
    bool masked = false;  // the iteration that reaches the row's end: chunks past it are masked
    int identity = -1;  // the vreg mask_tail fills past the row's end with (chunk_loop's tail_identity)
    int64_t offset(size_t i) const { return tile * kLanes * stream->element_bytes(i); }
    int64_t scratch_offset() const { return tile * kLanes * 4; }
  };
  void chunk_loop(const std::function<void(const Cursors&)>& body, std::optional<float> tail_identity = std::nullopt);
  int64_t chunk_unroll() const;

  // Replaces lanes at or past the row's end in `x` by the loop's identity.
  void mask_tail(int x, const Cursors& c);

  int scratch_stride() const { return static_cast<int>(stream_->block_cols_padded() * 4); }

  // The prologue's value for the chunk at `c`, in a fresh vreg (f32).
  int prologue_value(const Cursors& c);

  int constant(float value) { return TileCodegen(w_, vregs_, masks_, scratch_sreg_).constant_vreg(value); }

  void load_scratch(int vreg, const Cursors& c) {
    w_.line("vld v{}, m0, s{}, {}, {}", vreg, c.scratch, c.scratch_offset(), scratch_stride());
  }
  void store_scratch(int vreg, const Cursors& c) {
    w_.line("vst v{}, m0, s{}, {}, {}", vreg, c.scratch, c.scratch_offset(), scratch_stride());
  }

  void store_out(int vreg, const Cursors& c);

  // Pass 1: value -> scratch, acc (op)= value. Returns acc (per-lane partials).
  int first_pass(const char* combine, float identity);

  bool needs_scratch() const;

  // Sum of squared deviations from `mean` over the scratch row.
  int squared_deviations(int mean);

  // v /= (the launch's column count - minus), in f32 (IEEE division, so a zero count gives inf or
  // NaN as torch does).
  void divide_by_cols(int v, int64_t minus = 0);

  void store_row_result(int v);

  // One group of 8 rows: the op's passes over the row's chunks.
  void group();

  // sum, mean, max, min, prod, var: one value per row.
  void reduction();

  // softmax and log_softmax: the row maximum, the sum of exponentials, then each element.
  void softmax();

  // layer_norm and rms_norm: the row statistics, then each element scaled (and shifted).
  void norm();

  void block(int set, const BlockExtent& e);

  const RowwiseSpec& spec_;
  const sim::ChipConfig& chip_;
  AsmWriter w_;
  std::optional<BlockStream> stream_;
  RegisterPool vregs_{"vector registers", 0, 31}, masks_{"mask registers", 1, 7};
  int weight_ = -1, bias_ = -1, out_ = -1;
  int lane_ = -1, lane0_ = -1, tail_ = -1;
  bool hoist_tail_masks_;
  std::vector<int> tail_masks_;  // per chunk of the ragged last iteration: its lanes inside the row
  std::vector<int> rowbase_;
  int scratch_base_ = -1, scratch_sreg_ = -1;
};

}  // namespace vtpu::kernels::rowwise_detail
