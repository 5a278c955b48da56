// Schedule (each TensorCore takes a contiguous share of the heads), head by head (a batch entry):
//  - The head's q, k and v land in VMEM, each row padded to the MXU width D (the padding is never
//    written, so it stays zero); the next head's are fetched meanwhile into a second buffer (sem0).
//    A head too long for two buffers takes one: the next head's k and v are fetched once this
//    head's are weights, its q after this head's last chunk.
//  - k becomes the bf16 weight parts of k^T (128x128 blocks turned over by vtrans) and v those of
//    v: one D x D weight block per D keys, written once per head.
//  - Queries go in chunks of up to 32 tiles of 8 rows, one MXU accumulator slot per tile for the
//    scores (slots 0..31 of the scores MXU) and one for the probabilities' products (slots 32..63
//    of the values MXU). Per key block: (A) each tile's scores, weights loaded once per part for
//    the whole chunk; (B) per tile on the VPU: scale, causal and ragged-key masks, the online
//    softmax update (row maximum m, row sum l, rescale factor alpha kept in VMEM), and the
//    probabilities pushed through the values MXU; (C) the partial output acc = acc * alpha + p @ v.
//  - After the chunk's last key block: out = acc / l and lse = m + log(l), written back (sem1).
//    A head's output buffer is written again two heads later, after its writes have landed.
//  - Causal chunks stop at the key block holding their last query: blocks past it are all masked.
// f32 inputs take the matmul's multi-pass split (q and k^T, p and v, each into bf16 parts); bf16
// inputs one pass, with p rounded to bf16 like the other flash-attention kernels do.
//
// The builder is one class: set-up, head loop and weights in attention.cc, each chunk of queries
// against every key block (scores, online softmax, accumulation) in attention_chunk.cc.
// Internal to kernels/attention: include attention.h instead.
#pragma once

#include "isa/program.h"
#include "kernels/attention/attention_spec.h"
#include "sim/chip_config.h"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/codegen/asm_writer.h"
#include "kernels/attention/attention_masks.h"
#include "kernels/codegen/bf16_parts.h"
#include "kernels/codegen/operand.h"
#include "kernels/codegen/vreg_shape.h"

namespace vtpu::kernels::attention_detail {

inline constexpr int kSemInput = 0, kSemOutput = 1;
inline constexpr int64_t kVregBytes = kSublanes * kLanes * 4;
inline constexpr int64_t kRowOfVreg = kLanes * 4;  // bytes between sublanes of a vreg kept whole in VMEM
// A query tile's state record: m, l, alpha, then acc and (multi-pass) p, each a vreg per 128 lanes.
inline constexpr int64_t kStateM = 0, kStateL = kVregBytes, kStateAlpha = 2 * kVregBytes, kStateAcc = 3 * kVregBytes;

class AttentionBuilder {
 public:
  AttentionBuilder(const AttentionSpec& spec, const sim::ChipConfig& chip) : s_(spec), chip_(chip), w_("attention") {}

  isa::Program build();

  // What build() checks before it emits anything: the shape and that a head fits VMEM.
  void check();

 private:
  void validate() const;

  void plan();

  void emit();

  int64_t dmas_per_head() const { return chunks_ * (s_.write_lse ? 2 : 1); }

  void signal_outputs(int64_t n);
  void wait_outputs(int64_t n);

  // Which of a head's inputs a fetch takes (each signals sem0 once per tensor).
  static constexpr int kQueries = 1, kKeysAndValues = 2, kAllInputs = kQueries | kKeysAndValues;
  // `inputs` of head s`head` into the head buffer at s`buffer`.
  void issue_inputs(int head, int buffer, int inputs);
  // The next head's `inputs`, if there is one, into the buffer it will use (`t`: scratch).
  void fetch_next_head(int t, int inputs);

  // Writes vreg `x` as weights (its stored parts) to VMEM at s`addr` (+ part_stride per part),
  // rows `stride` apart (bf16_parts.h).
  void store_parts(int x, int addr, int64_t part_stride, int64_t stride);

  // k^T weights: key block j's part p is a D x D block (row = head dim, column = key) at
  // kt_vmem_ + p * kt_part_bytes_ + j * D * D * 2.
  void build_key_weights();

  // v weights: part p of key row t at vp_vmem_ + p * vp_part_bytes_ + t * D * 2 (key block j's
  // weights are rows j*D .. j*D + D - 1). Rows past kv_len stay zero.
  void build_value_weights();

  // One chunk of `tiles` query tiles (`rows` real rows) starting at query row s`c0_`.
  void emit_chunk(int tiles, int64_t rows);

  // Where a phase's LHS tiles are in VMEM: tile i's 8 rows at `first` (emitted into a cursor
  // register) + i * tile_step, its vreg g at + g * group_step, rows row_stride apart.
  struct LhsTiles {
    std::function<void(int cursor)> first;
    const char* load;
    int64_t group_step, row_stride, tile_step;
  };

  // The products of one phase by MXU passes: per weight part b (the D x D block of key block j at
  // region + b * part_bytes, loaded once for the chunk), every tile's LHS parts paired with b
  // pushed into slot slot0 + i of `mxu`.
  void products_by_part(int tiles, int mxu, int64_t region, int64_t part_bytes, int slot0, const LhsTiles& lhs);

  // (A) scores of every tile into scores-MXU slot i, weights loaded once per k^T part.
  void scores(int tiles);

  // Registers of one of the interleaved per-tile instruction streams of phases (B) and (C).
  struct Stream {
    int p = -1, t = -1;             // the tile's state record; a scratch scalar
    int q = -1;                     // the tile's query rows (when the stream pushes scores)
    int x = -1;                     // a group: the scores, then p (B); the products (C)
    int a = -1, b = -1, c = -1;     // single vregs
    int mask = 1;
  };

  // Up to `ways` streams (as many as the registers hold), each starting at tile k's record.
  std::vector<Stream> take_streams(int tiles, int ways, bool with_queries = false);
  void release_streams(const std::vector<Stream>& streams);
  // Runs body(stream, tile) for every tile as one software pipeline: tile i on stream i % ways,
  // starting a ways-th of a body's length after tile i - 1, so a stream's registers are free
  // again when its next tile starts.
  void for_tiles_interleaved(int tiles, const std::vector<Stream>& streams, const std::function<void(const Stream&, int)>& body);

  // As many streams as the registers hold next to the constants (5 vregs): each takes the group
  // and 3 vregs, a mask register and 3 scalars. More streams hide more of a chain's latency.
  int stream_ways() const { return group_ == 1 ? 6 : 5; }

  // (B) per tile: scores scaled and masked, m, l and alpha updated, p = exp(s - m) pushed through
  // the values MXU (one pass) or kept for the multi-pass products. Tiles run as interleaved
  // streams: each tile's chain (reductions, exponentials) is long and serial.
  void softmax_update(int tiles, bool next_scores);

  // (B') multi-pass: p's parts (kept in the tiles' records) times v's parts, weights loaded once
  // per v part for the chunk.
  void probabilities_times_values(int tiles);

  // Pipelined path: mxu.lwb of v's block `v_ahead` and k^T's block `k_ahead` (past s`base`, or
  // past 0 when base < 0; clamped to the last block) into the back buffers; the next mxu.swap
  // switches to them.
  void load_weights_ahead(int base, int v_ahead, int k_ahead);

  // (C) acc = acc * alpha + p @ v, per tile (interleaved streams like (B)).
  void rescale_and_accumulate(int tiles);

  // out = acc / l and lse = m + log(l) for the chunk's tiles, then their write-backs.
  void finish_chunk(int tiles, int64_t rows);

  const AttentionSpec& s_;
  const sim::ChipConfig& chip_;
  AsmWriter w_;
  RegisterPool vregs_{"vector registers", 0, 31};
  // The mask register finite forms use: the softmax streams take masks 1 to stream_ways().
  RegisterPool finite_mask_{"mask registers", 7, 7};
  AttentionGeometry g_;  // shared with the backward kernel
  int d_ = 0, group_ = 0, chunk_tiles_ = 0, head_lane_blocks_ = 1;
  int64_t full_chunks_ = 0, last_rows_ = 0, chunks_ = 0;
  int64_t record_bytes_ = 0, head_bytes_ = 0, kt_part_bytes_ = 0, vp_part_bytes_ = 0;
  int64_t q_off_ = 0, k_off_ = 0, v_off_ = 0, o_off_ = 0, l_off_ = 0, kt_vmem_ = 0, vp_vmem_ = 0, state_vmem_ = 0;
  bool pipelined_ = false;
  int mxu_scores_ = 0, mxu_values_ = 0;
  int q_arg_ = 0, k_arg_ = 0, v_arg_ = 0, out_arg_ = 0;
  int buffers_ = 2;  // head buffers: 2 (the next head's inputs arrive meanwhile) or 1 (long heads)
  int bh_ = -1, hb_ = -1, heads_ = -1, c0_ = -1, j_ = -1;
  AttentionConstants c_;
};

}  // namespace vtpu::kernels::attention_detail
