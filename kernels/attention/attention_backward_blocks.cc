// The fused attention backward's key-block loop: per key block and query block, scores and dp
// recomputed, probabilities and ds on the VPU, dq accumulated in VMEM, dk and dv in accumulator
// slots (attention_backward_builder.h).
#include "kernels/attention/attention_backward_builder.h"

#include <fmt/format.h>

namespace vtpu::kernels::attention_backward_detail {

void AttentionBackwardBuilder::key_blocks() {
  auto& r = w_.sregs();
  j_ = r.take();
  c0_ = r.take();
  const int n = r.take(), t = r.take(), end = r.take();
  const std::string loop = w_.new_label("key_block"), no_ragged = w_.new_label("no_ragged_block");
  w_.line("sli s{}, 0", j_);
  w_.load_immediate(n, g_.key_blocks);
  w_.place(loop);
  if (g_.parts == 1) {  // several parts: loaded per query block and part
    load_key_weights(kScores, kt_, 0, t);
    if (!paired_) load_key_weights(kDp, vt_, 0, t);  // paired, v^T shares mxu0
    load_key_weights(kDq, kw_, 0, t);
  }
  // the first query block: causal ones start at the block of the first key
  if (s_.causal) w_.line("smuli s{}, s{}, {}", c0_, j_, kBlock);
  else w_.line("sli s{}, 0", c0_);
  w_.load_immediate(end, full_query_blocks_ * kBlock);
  if (full_query_blocks_ > 0) {
    const std::string qloop = w_.new_label("query_block"), qdone = w_.new_label("query_blocks_done");
    w_.line("bge s{}, s{}, {}", c0_, end, qdone);
    w_.place(qloop);
    query_block(kTiles);
    w_.line("saddi s{}, s{}, {}", c0_, c0_, kBlock);
    w_.line("blt s{}, s{}, {}", c0_, end, qloop);
    w_.place(qdone);
  }
  if (last_rows_ > 0) {
    w_.line("blt s{}, s{}, {}", end, c0_, no_ragged);  // a causal block past the last queries
    w_.line("smov s{}, s{}", c0_, end);
    query_block(static_cast<int>((last_rows_ + kSublanes - 1) / kSublanes));
    w_.place(no_ragged);
  }
  pop_key_gradients();
  w_.line("saddi s{}, s{}, 1", j_, j_);
  w_.line("blt s{}, s{}, {}", j_, n, loop);
  for (int x : {j_, c0_, n, t, end}) r.release(x);
}

// Part `part` of key block s`j_`'s weight at `at` into `mxu`, through scalar `t`.
void AttentionBackwardBuilder::load_key_weights(int mxu, int64_t at, int part, int t) {
  w_.line("smuli s{}, s{}, {}", t, j_, weight_block_);
  w_.line("saddi s{}, s{}, {}", t, t, at + part * key_part_);
  w_.line("mxu.lw mxu{}, s{}, {}", mxu, t, weight_row_);
}

// One query block of `tiles` tiles starting at query s`c0_`, against key block s`j_`.
void AttentionBackwardBuilder::query_block(int tiles) {
  scores_and_dp(tiles);
  probabilities_and_ds(tiles);
  if (g_.parts > 1) dq_products(tiles);
  transposed_products();
  accumulate_dq(tiles);
}

// LHS vregs x..x+count-1 as stored weight part b's passes multiply them: as they are for the
// leading pass (b = 0), their finite forms for the others (bf16_parts.h).
void AttentionBackwardBuilder::finite_forms(int x, int count, int b, int scratch) {
  lhs_for_weight_part(w_, finite_mask_, x, count, b, g_.finite_passes, c_.zero, scratch);
}

// (1) scores q @ k^T into mxu0 slot i and dout @ v^T into mxu1 slot i (paired: both in mxu0
// slot i), per weight part the LHS parts paired with it.
void AttentionBackwardBuilder::scores_and_dp(int tiles) {
  auto& r = w_.sregs();
  const int qp = r.take(), dp = r.take(), t = r.take();
  const int x = vregs_.take_run(2), y = x + 1;  // paired, [q | dout] is one MXU row
  const int scratch = g_.finite_passes ? vregs_.take() : -1;
  for (int b = 0; b < g_.stored_parts; ++b) {
    const std::vector<int> lhs = lhs_parts(b);
    if (lhs.empty()) continue;
    if (g_.parts > 1) {
      load_key_weights(kScores, kt_, b, t);
      if (!paired_) load_key_weights(kDp, vt_, b, t);
    }
    w_.line("smuli s{}, s{}, {}", t, c0_, g_.row_bytes);
    w_.line("saddi s{}, s{}, {}", qp, t, q_);
    w_.line("saddi s{}, s{}, {}", dp, t, do_);
    for (int i = 0; i < tiles; ++i) {
      w_.line("{} v{}, m0, s{}, 0, {}", load_mnemonic(s_.dtype), x, qp, g_.row_bytes);
      w_.line("{} v{}, m0, s{}, 0, {}", load_mnemonic(s_.dtype), y, dp, g_.row_bytes);
      finite_forms(x, 2, b, scratch);
      int held = 0;
      for (int a : lhs) {
        peel_bf16_parts(w_, vregs_, x, 2, held, a);
        held = a;
        if (paired_) {
          w_.line("mxu.mm mxu{}, v{}, {}", kScores, x, i);
        } else {
          w_.line("mxu.mm mxu{}, v{}, {}", kScores, x, i);
          w_.line("mxu.mm mxu{}, v{}, {}", kDp, y, i);
        }
      }
      w_.line("saddi s{}, s{}, {}", qp, qp, kSublanes * g_.row_bytes);
      w_.line("saddi s{}, s{}, {}", dp, dp, kSublanes * g_.row_bytes);
    }
  }
  if (scratch >= 0) vregs_.release(scratch);
  vregs_.release_run(x, 2);
  for (int v : {qp, dp, t}) r.release(v);
}

// (2b), several parts: dq's share ds @ k from the staged ds, per part of k.
void AttentionBackwardBuilder::dq_products(int tiles) {
  auto& r = w_.sregs();
  const int a = r.take(), t = r.take();
  const int x = vregs_.take_run(2);  // paired, [ds | 0]
  if (paired_) w_.line("vmov v{}, v{}", x + 1, c_.zero);
  const int scratch = g_.finite_passes ? vregs_.take() : -1;
  for (int b = 0; b < g_.stored_parts; ++b) {
    const std::vector<int> lhs = lhs_parts(b);
    if (lhs.empty()) continue;
    load_key_weights(kDq, kw_, b, t);
    w_.load_immediate(a, ds_stage_);
    for (int i = 0; i < tiles; ++i) {
      w_.line("vld v{}, m0, s{}, 0, {}", x, a, kRowOfVreg);
      finite_forms(x, 1, b, scratch);
      int held = 0;
      for (int lp : lhs) {
        peel_bf16_parts(w_, vregs_, x, 1, held, lp);
        held = lp;
        w_.line("mxu.mm mxu{}, v{}, {}", kDq, x, i);
      }
      w_.line("saddi s{}, s{}, {}", a, a, kVregBytes);
    }
  }
  if (scratch >= 0) vregs_.release(scratch);
  vregs_.release_run(x, 2);
  r.release(a);
  r.release(t);
}

// (2) per tile: p and ds, ds @ k into mxu2, p and ds staged for the transposes.
void AttentionBackwardBuilder::probabilities_and_ds(int tiles) {
  auto& r = w_.sregs();
  const int st = r.take(), ps = r.take(), dss = r.take(), t = r.take(), diag = r.take(), last_key = r.take();
  w_.line("smuli s{}, s{}, {}", st, c0_, 2 * kVregBytes / kSublanes);
  w_.line("saddi s{}, s{}, {}", st, st, rows_);
  w_.load_immediate(ps, p_stage_);
  w_.load_immediate(dss, ds_stage_);
  w_.line("smuli s{}, s{}, {}", t, j_, kBlock);
  w_.line("ssub s{}, s{}, s{}", diag, c0_, t);  // first query of the block - first key
  w_.load_immediate(last_key, s_.kv_len - 1);
  w_.line("ssub s{}, s{}, s{}", last_key, last_key, t);
  // p, dp then ds, and a zero: paired, one pop gives [scores | dp] and [ds | 0] is pushed
  const int p = vregs_.take_run(3), d = p + 1, zero = p + 2, a = vregs_.take(), th = vregs_.take();
  if (paired_) w_.line("vmov v{}, v{}", zero, c_.zero);
  for (int i = 0; i < tiles; ++i) {
    w_.line("mxu.pop v{}, mxu{}, {}", p, kScores, i);
    w_.line("vmul v{}, v{}, v{}", p, p, c_.scale);
    if (s_.causal) mask_keys_past(w_, c_, p, diag, int64_t(i) * kSublanes, c_.lane_minus_sub, th, t, 1);
    if (g_.ragged_keys) mask_keys_past(w_, c_, p, last_key, 0, c_.lane, th, t, 1);
    w_.line("vld v{}, m0, s{}, 0, {}", a, st, kRowOfVreg);
    w_.line("vsub v{}, v{}, v{}", p, p, a);
    w_.line("vexp v{}, v{}", p, p);  // p = exp(s - lse): 0 where masked
    if (!paired_) w_.line("mxu.pop v{}, mxu{}, {}", d, kDp, i);
    w_.line("vld v{}, m0, s{}, {}, {}", a, st, kVregBytes, kRowOfVreg);
    w_.line("vsub v{}, v{}, v{}", d, d, a);
    w_.line("vmul v{}, v{}, v{}", d, d, p);  // ds = p * (dp - delta)
    w_.line("vst v{}, m0, s{}, 0, {}", p, ps, kRowOfVreg);
    w_.line("vst v{}, m0, s{}, 0, {}", d, dss, kRowOfVreg);
    if (g_.parts == 1) w_.line("mxu.mm mxu{}, v{}, {}", kDq, d, i);
    w_.line("saddi s{}, s{}, {}", st, st, 2 * kVregBytes);
    w_.line("saddi s{}, s{}, {}", ps, ps, kVregBytes);
    w_.line("saddi s{}, s{}, {}", dss, dss, kVregBytes);
  }
  vregs_.release_run(p, 3);
  for (int v : {a, th}) vregs_.release(v);
  for (int v : {st, ps, dss, t, diag, last_key}) r.release(v);
}

// (3) p^T @ dout into mxu3 slots 0..15 (dv rows), ds^T @ q into slots 16..31 (dk rows); paired,
// [p^T tile | 0] and [0 | ds^T tile] both go into slot v against the one block-diagonal weight.
// Staged rows past the block's tiles hold an earlier block's finite values; the weight rows they
// meet (queries past q_len) are zero.
void AttentionBackwardBuilder::transposed_products() {
  auto& r = w_.sregs();
  const int a = r.take(), t = r.take();
  const int block = vregs_.take_run(16, 16);
  // Paired, or peeling parts, a tile is pushed from a copy: zero, tile, zero.
  const bool copied = paired_ || g_.parts > 1;
  const int lhs = copied ? vregs_.take_run(3) : -1;
  const int scratch = g_.finite_passes ? vregs_.take() : -1;
  if (paired_) {
    w_.line("vmov v{}, v{}", lhs, c_.zero);
    w_.line("vmov v{}, v{}", lhs + 2, c_.zero);
  }
  const std::pair<int64_t, int64_t> passes[] = {{p_stage_, dow_}, {ds_stage_, qw_}};
  for (int k = 0; k < 2; ++k) {
    w_.load_immediate(a, passes[k].first);
    for (int v = 0; v < 16; ++v) {
      w_.line("vld v{}, m0, s{}, 0, {}", block + v, a, kRowOfVreg);
      w_.line("saddi s{}, s{}, {}", a, a, kVregBytes);
    }
    w_.line("vtrans v{}, v{}", block, block);
    for (int b = 0; b < g_.stored_parts; ++b) {
      const std::vector<int> parts = lhs_parts(b);
      if (parts.empty()) continue;
      if (!paired_ || k == 0 || g_.parts > 1) {  // paired at one pass, the block diagonal serves both
        w_.line("smuli s{}, s{}, {}", t, c0_, weight_block_ / kBlock);
        w_.line("saddi s{}, s{}, {}", t, t, (paired_ ? dow_ : passes[k].second) + b * query_part_);
        w_.line("mxu.lw mxu{}, s{}, {}", kTransposed, t, weight_row_);
      }
      for (int v = 0; v < 16; ++v) {
        const int slot = paired_ ? v : k * kTiles + v;
        if (!copied) {
          w_.line("mxu.mm mxu{}, v{}, {}", kTransposed, block + v, slot);
          continue;
        }
        w_.line("vmov v{}, v{}", lhs + 1, block + v);
        finite_forms(lhs + 1, 1, b, scratch);
        int held = 0;
        for (int lp : parts) {
          peel_bf16_parts(w_, vregs_, lhs + 1, 1, held, lp);
          held = lp;
          w_.line("mxu.mm mxu{}, v{}, {}", kTransposed, paired_ && k == 1 ? lhs : lhs + 1, slot);
        }
      }
    }
  }
  if (scratch >= 0) vregs_.release(scratch);
  vregs_.release_run(block, 16);
  if (copied) vregs_.release_run(lhs, 3);
  r.release(a);
  r.release(t);
}

// (4) dq += (ds @ k) * scale, per tile.
void AttentionBackwardBuilder::accumulate_dq(int tiles) {
  auto& r = w_.sregs();
  const int a = r.take();
  const int x = vregs_.take_run(2), acc = vregs_.take();  // paired, a pop fills two vregs
  w_.line("smuli s{}, s{}, {}", a, c0_, kRowOfVreg);
  w_.line("saddi s{}, s{}, {}", a, a, dq_acc_);
  for (int i = 0; i < tiles; ++i) {
    w_.line("mxu.pop v{}, mxu{}, {}", x, kDq, i);
    w_.line("vld v{}, m0, s{}, 0, {}", acc, a, kRowOfVreg);
    w_.line("vfma v{}, v{}, v{}, v{}", acc, x, c_.scale, acc);
    w_.line("vst v{}, m0, s{}, 0, {}", acc, a, kRowOfVreg);
    w_.line("saddi s{}, s{}, {}", a, a, kVregBytes);
  }
  vregs_.release_run(x, 2);
  vregs_.release(acc);
  r.release(a);
}

// Key block j's dv rows (slots 0..15) and dk rows (slots 16..31, times scale) into the outputs;
// paired, slot v holds both.
void AttentionBackwardBuilder::pop_key_gradients() {
  auto& r = w_.sregs();
  const int dv = r.take(), dk = r.take();
  const int x = vregs_.take_run(2);
  w_.line("smuli s{}, s{}, {}", dv, j_, kBlock * g_.row_bytes);
  w_.line("saddi s{}, s{}, {}", dk, dv, dk_out_);
  w_.line("saddi s{}, s{}, {}", dv, dv, dv_out_);
  for (int v = 0; v < kTiles; ++v) {
    w_.line("mxu.pop v{}, mxu{}, {}", x, kTransposed, v);
    w_.line("{} v{}, m0, s{}, 0, {}", store_mnemonic(s_.dtype), x, dv, g_.row_bytes);
    if (!paired_) w_.line("mxu.pop v{}, mxu{}, {}", x + 1, kTransposed, kTiles + v);
    w_.line("vmul v{}, v{}, v{}", x + 1, x + 1, c_.scale);
    w_.line("{} v{}, m0, s{}, 0, {}", store_mnemonic(s_.dtype), x + 1, dk, g_.row_bytes);
    w_.line("saddi s{}, s{}, {}", dv, dv, kSublanes * g_.row_bytes);
    w_.line("saddi s{}, s{}, {}", dk, dk, kSublanes * g_.row_bytes);
  }
  vregs_.release_run(x, 2);
  r.release(dv);
  r.release(dk);
}

}  // namespace vtpu::kernels::attention_backward_detail
