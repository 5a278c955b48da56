// Schedule (each TensorCore takes a contiguous share of the heads), head by head:
//  - The head's q, k, v, out, dout and lse land in VMEM (rows padded to 128 lanes with zeros).
//    Weights are written once per head in bf16: k^T and v^T per key block (vtrans), and k, q and
//    dout as rows. Per query tile: lse broadcast along its rows and delta = rowsum(dout * out).
//  - Per key block j: k^T (mxu0), v^T (mxu1) and k (mxu2) are loaded once; per 128-query block:
//    (1) scores q @ k^T into mxu0 slot i and dp = dout @ v^T into mxu1 slot i for every 8-query
//    tile i; (2) per tile: p = exp(scores * scale - lse) (causal and ragged keys masked to 0),
//    ds = p * (dp - delta), ds pushed through mxu2 (dq's share), p and ds staged in VMEM;
//    (3) p and ds turned over by vtrans; mxu3 adds p^T @ dout into slots 0..15 (dv rows) and
//    ds^T @ q into slots 16..31 (dk rows) across the query blocks; (4) dq's shares added into a
//    VMEM accumulator (times scale).
//  - After the block's last query block its dv and dk rows are popped; after the last block dq
//    is converted, and the three gradients go back (sem1) before the next head's inputs land.
//  - Causal: a key block starts at the query block holding its first key (earlier queries see
//    none of its keys).
//  - On a 256-wide MXU (v6e) the blocks stay 128 wide and two 128 x 128 weight blocks share one
//    MXU as a block diagonal: mxu0 holds k^T and v^T, so one push of [q tile | dout tile] gives
//    [scores | dp]; mxu3 holds dout and q rows, and pushes of [p^T tile | 0] and [0 | ds^T tile]
//    add up to [dv rows | dk rows] in one slot; ds @ k pushes [ds | 0] against k in the top-left
//    quadrant. The weights' off-diagonal quadrants are never written, so they stay VMEM's zeros.
//  - f32 at several MXU passes (precision 'high', 'highest'): every weight is written as bf16
//    parts (the value rounded, the rounding error rounded, the rest), and each product becomes
//    the matmul's pass pairs: per weight part, the LHS parts paired with it, peeled off the f32
//    LHS on the vector unit. The weights then change within a query block, so they are loaded
//    per (query block, part), and ds @ k runs after the tiles from the staged ds.
//
// The builder is one class: set-up, per-head loads, weights and write-backs in
// attention_backward.cc, the key-block loop (scores, dp, ds and the five products) in
// attention_backward_blocks.cc. Internal to kernels/attention: include attention_backward.h.
#pragma once

#include "isa/program.h"
#include "kernels/attention/attention_spec.h"
#include "sim/chip_config.h"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/codegen/asm_writer.h"
#include "kernels/attention/attention_masks.h"
#include "kernels/codegen/bf16_parts.h"
#include "kernels/codegen/operand.h"
#include "kernels/codegen/vreg_shape.h"

namespace vtpu::kernels::attention_backward_detail {

inline constexpr int kSemInput = 0, kSemOutput = 1;
inline constexpr int kBlock = 128;  // keys per key block, queries per query block: one MXU width
inline constexpr int kTiles = kBlock / kSublanes;
inline constexpr int64_t kVregBytes = kSublanes * kLanes * 4, kRowOfVreg = kLanes * 4;
inline constexpr int kScores = 0, kDp = 1, kDq = 2, kTransposed = 3;  // MXUs

class AttentionBackwardBuilder {
 public:
  AttentionBackwardBuilder(const AttentionSpec& spec, const sim::ChipConfig& chip) : s_(spec), chip_(chip), w_("attention_backward") {}

  void check();

  isa::Program build();

 private:
  void plan();
  // Places every buffer, the gradients' own or over out, k and v; returns the VMEM used.
  uint64_t place_buffers(bool reuse_inputs_for_gradients);

  void emit();

  // The head's six inputs into VMEM; waits for them (the previous head's write-backs have landed).
  void load_head();

  // Per key block: the 128 x 128 block of rows j*128.. of `src` transposed into bf16 weights.
  void transposed_weights(int64_t src_at, int64_t dst_at);

  // Vreg `x` as bf16 weight rows at s`addr`, its stored parts `part_stride` apart (bf16_parts.h).
  // Leaves x changed.
  void store_parts(int x, int addr, int64_t part_stride);

  // The LHS parts paired with stored weight part b, in increasing order (each peeled from the
  // last).
  std::vector<int> lhs_parts(int b) const;

  // LHS vregs x..x+count-1 as stored weight part b's passes multiply them (the finite forms but
  // for the leading pass); v`scratch` is clobbered.
  void finite_forms(int x, int count, int b, int scratch);

  // The `rows` rows of `src` (a multiple of 128: padding rows are zero) as bf16 weight rows, 128
  // rows to a weight block; its parts `part_stride` apart.
  void row_weights(int64_t src_at, int64_t dst_at, int64_t rows, int64_t part_stride);

  // Per query tile: lse broadcast along each row, and delta = rowsum(dout * out).
  void row_state();

  void clear_dq();

  void key_blocks();

  // Part `part` of key block s`j_`'s weight at `at` into `mxu`, through scalar `t`.
  void load_key_weights(int mxu, int64_t at, int part, int t);

  // One query block of `tiles` tiles starting at query s`c0_`, against key block s`j_`.
  void query_block(int tiles);

  // (1) scores q @ k^T into mxu0 slot i and dout @ v^T into mxu1 slot i (paired: both in mxu0
  // slot i), per weight part the LHS parts paired with it.
  void scores_and_dp(int tiles);

  // (2b), several parts: dq's share ds @ k from the staged ds, per part of k.
  void dq_products(int tiles);

  // (2) per tile: p and ds, ds @ k into mxu2, p and ds staged for the transposes.
  void probabilities_and_ds(int tiles);

  // (3) p^T @ dout into mxu3 slots 0..15 (dv rows), ds^T @ q into slots 16..31 (dk rows); paired,
  // [p^T tile | 0] and [0 | ds^T tile] both go into slot v against the one block-diagonal weight.
  // Staged rows past the block's tiles hold an earlier block's finite values; the weight rows they
  // meet (queries past q_len) are zero.
  void transposed_products();

  // (4) dq += (ds @ k) * scale, per tile.
  void accumulate_dq(int tiles);

  // Key block j's dv rows (slots 0..15) and dk rows (slots 16..31, times scale) into the outputs;
  // paired, slot v holds both.
  void pop_key_gradients();

  // dq converted, then dq, dk and dv of this head back to HBM; waits for them.
  void write_back();

  const AttentionSpec& s_;
  const sim::ChipConfig& chip_;
  AsmWriter w_;
  RegisterPool vregs_{"vector registers", 0, 31};
  // The mask register finite forms use (the causal and ragged-key masks take mask 1).
  RegisterPool finite_mask_{"mask registers", 7, 7};
  AttentionGeometry g_;  // shared with the forward kernel
  int64_t full_query_blocks_ = 0, last_rows_ = 0;
  bool paired_ = false;                           // a 256-wide MXU holds two 128-wide weight blocks
  int64_t key_part_ = 0, query_part_ = 0;         // bytes between a weight's parts
  int64_t weight_row_ = 0, weight_block_ = 0;     // bytes of one MXU weight row, of D such rows
  int64_t q_ = 0, k_ = 0, v_ = 0, o_ = 0, do_ = 0, lse_ = 0, kt_ = 0, vt_ = 0, kw_ = 0, qw_ = 0, dow_ = 0, rows_ = 0;
  int64_t dq_acc_ = 0, p_stage_ = 0, ds_stage_ = 0, dq_out_ = 0, dk_out_ = 0, dv_out_ = 0;
  std::vector<int> args_;
  int lse_arg_ = 0, grads_arg_ = 0;
  int bh_ = -1, j_ = -1, c0_ = -1;
  AttentionConstants c_;
};

}  // namespace vtpu::kernels::attention_backward_detail
