// The fused attention forward, one chunk of queries against every key block: scores on one
// MXU, the online softmax on the VPU as interleaved instruction streams, probabilities times
// values on another MXU, and the chunk's output and logsumexp written back (attention_builder.h).
#include "kernels/attention/attention_builder.h"

#include <fmt/format.h>

namespace vtpu::kernels::attention_detail {

// One chunk of `tiles` query tiles (`rows` real rows) starting at query row s`c0_`.
void AttentionBuilder::emit_chunk(int tiles, int64_t rows) {
  auto& r = w_.sregs();
  const int p = r.take(), t = r.take(), u = r.take(), jend = r.take();
  j_ = r.take();
  w_.load_immediate(p, state_vmem_);
  for (int i = 0; i < tiles; ++i) {
    w_.line("vst v{}, m0, s{}, {}, {}", c_.neg_inf, p, kStateM, kRowOfVreg);
    w_.line("vst v{}, m0, s{}, {}, {}", c_.zero, p, kStateL, kRowOfVreg);
    for (int g = 0; g < group_; ++g) w_.line("vst v{}, m0, s{}, {}, {}", c_.zero, p, kStateAcc + g * kVregBytes, kRowOfVreg);
    w_.line("saddi s{}, s{}, {}", p, p, record_bytes_);
  }
  if (s_.causal) {  // key blocks up to the one holding the chunk's last query
    w_.line("saddi s{}, s{}, {}", t, c0_, rows - 1);
    w_.load_immediate(u, d_);
    w_.line("sdiv s{}, s{}, s{}", t, t, u);
    w_.line("saddi s{}, s{}, 1", t, t);
    w_.load_immediate(u, g_.key_blocks);
    w_.line("smin s{}, s{}, s{}", jend, t, u);
  } else {
    w_.load_immediate(jend, g_.key_blocks);
  }
  for (int x : {p, t, u}) r.release(x);
  w_.line("sli s{}, 0", j_);
  const std::string block_loop = w_.new_label("key_block");
  if (pipelined_) {
    // One pass: the next block's scores are pushed from inside this block's softmax streams,
    // so the scores MXU works while the VPU does (software pipelining over key blocks). Weights
    // are loaded a phase ahead into the back buffers (mxu.lwb) and switched in (mxu.swap).
    scores(tiles);
    load_weights_ahead(-1, 0, 1);
    w_.place(block_loop);
    const std::string last = w_.new_label("last_key_block"), update_done = w_.new_label("update_done");
    const int t = r.take();
    w_.line("saddi s{}, s{}, 1", t, j_);
    w_.line("bge s{}, s{}, {}", t, jend, last);
    r.release(t);
    softmax_update(tiles, true);
    w_.line("jmp {}", update_done);
    w_.place(last);
    softmax_update(tiles, false);
    w_.place(update_done);
  } else {
    w_.place(block_loop);
    scores(tiles);
    softmax_update(tiles, false);
    if (g_.parts > 1) probabilities_times_values(tiles);
  }
  rescale_and_accumulate(tiles);
  w_.line("saddi s{}, s{}, 1", j_, j_);
  w_.line("blt s{}, s{}, {}", j_, jend, block_loop);
  r.release(jend);
  r.release(j_);
  finish_chunk(tiles, rows);
}

// The products of one phase by MXU passes: per stored weight part b (the D x D block of key
// block j at region + b * part_bytes, loaded once for the chunk), every tile's LHS parts paired
// with b pushed into slot slot0 + i of `mxu`: the LHS as it is in the leading pass, its finite
// form in the others (bf16_parts.h).
void AttentionBuilder::products_by_part(int tiles, int mxu, int64_t region, int64_t part_bytes, int slot0, const LhsTiles& lhs) {
  auto& r = w_.sregs();
  const int cursor = r.take(), t = r.take();
  const int x = vregs_.take_run(group_, group_);
  const int scratch = g_.finite_passes ? vregs_.take() : -1;
  for (int b = 0; b < g_.stored_parts; ++b) {
    const std::vector<int> lhs_parts = lhs_parts_against(g_.pairs, b, g_.finite_passes);
    if (lhs_parts.empty()) continue;
    w_.line("smuli s{}, s{}, {}", t, j_, int64_t(d_) * d_ * 2);
    w_.line("saddi s{}, s{}, {}", t, t, region + b * part_bytes);
    w_.line("mxu.lw mxu{}, s{}, {}", mxu, t, d_ * 2);
    lhs.first(cursor);
    for (int i = 0; i < tiles; ++i) {
      for (int g = 0; g < group_; ++g) {
        w_.line("{} v{}, m0, s{}, {}, {}", lhs.load, x + g, cursor, g * lhs.group_step, lhs.row_stride);
        lhs_for_weight_part(w_, finite_mask_, x + g, 1, b, g_.finite_passes, c_.zero, scratch);
      }
      int held = 0;
      for (int lp : lhs_parts) {
        peel_bf16_parts(w_, vregs_, x, group_, held, lp);
        held = lp;
        w_.line("mxu.mm mxu{}, v{}, {}", mxu, x, slot0 + i);
      }
      w_.line("saddi s{}, s{}, {}", cursor, cursor, lhs.tile_step);
    }
  }
  if (scratch >= 0) vregs_.release(scratch);
  vregs_.release_run(x, group_);
  r.release(cursor);
  r.release(t);
}

// (A) scores of every tile into scores-MXU slot i, weights loaded once per k^T part.
void AttentionBuilder::scores(int tiles) {
  const LhsTiles queries{[&](int q) {
                           w_.line("smuli s{}, s{}, {}", q, c0_, g_.row_bytes);
                           w_.line("sadd s{}, s{}, s{}", q, q, hb_);
                           w_.line("saddi s{}, s{}, {}", q, q, q_off_);
                         },
                         load_mnemonic(s_.dtype), kLanes * g_.element_bytes, g_.row_bytes, kSublanes * g_.row_bytes};
  products_by_part(tiles, mxu_scores_, kt_vmem_, kt_part_bytes_, 0, queries);
}

// Up to `ways` streams (as many as the registers hold), each starting at tile k's record.
std::vector<AttentionBuilder::Stream> AttentionBuilder::take_streams(int tiles, int ways, bool with_queries) {
  std::vector<Stream> streams(std::min(tiles, ways));
  for (size_t k = 0; k < streams.size(); ++k) {
    Stream& st = streams[k];
    st.p = w_.sregs().take();
    st.t = w_.sregs().take();
    st.x = vregs_.take_run(group_, group_);
    for (int* v : {&st.a, &st.b, &st.c}) *v = vregs_.take();
    st.mask = 1 + static_cast<int>(k);
    w_.load_immediate(st.p, state_vmem_ + int64_t(k) * record_bytes_);
    if (!with_queries) continue;
    st.q = w_.sregs().take();
    w_.line("smuli s{}, s{}, {}", st.q, c0_, g_.row_bytes);
    w_.line("sadd s{}, s{}, s{}", st.q, st.q, hb_);
    w_.line("saddi s{}, s{}, {}", st.q, st.q, q_off_ + int64_t(k) * kSublanes * g_.row_bytes);
  }
  return streams;
}

void AttentionBuilder::release_streams(const std::vector<Stream>& streams) {
  for (const Stream& st : streams) {
    w_.sregs().release(st.p);
    w_.sregs().release(st.t);
    if (st.q >= 0) w_.sregs().release(st.q);
    vregs_.release_run(st.x, group_);
    for (int v : {st.a, st.b, st.c}) vregs_.release(v);
  }
}

// Runs body(stream, tile) for every tile as one software pipeline: tile i on stream i % ways,
// starting a ways-th of a body's length after tile i - 1, so a stream's registers are free
// again when its next tile starts.
void AttentionBuilder::for_tiles_interleaved(int tiles, const std::vector<Stream>& streams, const std::function<void(const Stream&, int)>& body) {
  const int ways = static_cast<int>(streams.size());
  std::vector<std::function<void()>> bodies;
  for (int i = 0; i < tiles; ++i) {
    bodies.push_back([&, i] {
      const Stream& st = streams[i % ways];
      body(st, i);
      w_.line("saddi s{}, s{}, {}", st.p, st.p, ways * record_bytes_);
    });
  }
  w_.interleave(bodies, ways);
}

// (B) per tile: scores scaled and masked, m, l and alpha updated, p = exp(s - m) pushed through
// the values MXU (one pass) or kept for the multi-pass products. Tiles run as interleaved
// streams: each tile's chain (reductions, exponentials) is long and serial.
void AttentionBuilder::softmax_update(int tiles, bool next_scores) {
  auto& r = w_.sregs();
  const int t = r.take(), diag = r.take(), last_key = r.take();
  if (pipelined_) {
    w_.line("mxu.swap mxu{}", mxu_values_);
    if (next_scores) w_.line("mxu.swap mxu{}", mxu_scores_);  // block j + 1's k^T
  } else if (g_.parts == 1) {
    w_.line("smuli s{}, s{}, {}", t, j_, int64_t(d_) * d_ * 2);
    w_.line("saddi s{}, s{}, {}", t, t, vp_vmem_);
    w_.line("mxu.lw mxu{}, s{}, {}", mxu_values_, t, d_ * 2);
  }
  w_.line("smuli s{}, s{}, {}", t, j_, d_);
  w_.line("ssub s{}, s{}, s{}", diag, c0_, t);  // first query row - first key of the block
  w_.load_immediate(last_key, s_.kv_len - 1);
  w_.line("ssub s{}, s{}, s{}", last_key, last_key, t);  // last real key - first key of the block
  const auto streams = take_streams(tiles, stream_ways(), next_scores);
  const int64_t ways = static_cast<int64_t>(streams.size());
  for_tiles_interleaved(tiles, streams, [&](const Stream& st, int i) {
    // registers reused once their first value is dead: th -> sum, mx -> l
    const int sc = st.x, mx = st.a, m_old = st.b, th = st.c, sum = st.c, l = st.a, p = st.p;
    w_.line("mxu.pop v{}, mxu{}, {}", sc, mxu_scores_, i);
    for (int g = 0; g < group_; ++g) {
      w_.line("vmul v{}, v{}, v{}", sc + g, sc + g, c_.scale);
      if (s_.causal) mask_keys_past(w_, c_, sc + g, diag, int64_t(i) * kSublanes - int64_t(g) * kLanes, c_.lane_minus_sub, th, st.t, st.mask);
      if (g_.ragged_keys) mask_keys_past(w_, c_, sc + g, last_key, -int64_t(g) * kLanes, c_.lane, th, st.t, st.mask);
    }
    w_.line("vmov v{}, v{}", mx, sc);
    for (int g = 1; g < group_; ++g) w_.line("vmax v{}, v{}, v{}", mx, mx, sc + g);
    w_.line("vredmax.lane v{}, v{}", mx, mx);
    w_.line("vld v{}, m0, s{}, {}, {}", m_old, p, kStateM, kRowOfVreg);
    w_.line("vmax v{}, v{}, v{}", mx, m_old, mx);
    w_.line("vst v{}, m0, s{}, {}, {}", mx, p, kStateM, kRowOfVreg);
    w_.line("vsub v{}, v{}, v{}", m_old, m_old, mx);
    w_.line("vexp v{}, v{}", m_old, m_old);  // alpha = exp(m_old - m_new): 0 on the first block
    w_.line("vst v{}, m0, s{}, {}, {}", m_old, p, kStateAlpha, kRowOfVreg);
    for (int g = 0; g < group_; ++g) {
      w_.line("vsub v{}, v{}, v{}", sc + g, sc + g, mx);
      w_.line("vexp v{}, v{}", sc + g, sc + g);
    }
    w_.line("vmov v{}, v{}", sum, sc);
    for (int g = 1; g < group_; ++g) w_.line("vadd v{}, v{}, v{}", sum, sum, sc + g);
    w_.line("vredsum.lane v{}, v{}", sum, sum);
    w_.line("vld v{}, m0, s{}, {}, {}", l, p, kStateL, kRowOfVreg);
    w_.line("vfma v{}, v{}, v{}, v{}", l, l, m_old, sum);
    w_.line("vst v{}, m0, s{}, {}, {}", l, p, kStateL, kRowOfVreg);
    if (g_.parts == 1) {
      w_.line("mxu.mm mxu{}, v{}, {}", mxu_values_, sc, chunk_tiles_ + i);
    } else {
      for (int g = 0; g < group_; ++g) {
        w_.line("vst v{}, m0, s{}, {}, {}", sc + g, p, kStateAcc + (group_ + g) * kVregBytes, kRowOfVreg);
      }
    }
    if (next_scores) {  // this tile's scores against block j + 1, into the slot just popped
      for (int g = 0; g < group_; ++g) {
        w_.line("{} v{}, m0, s{}, {}, {}", load_mnemonic(s_.dtype), sc + g, st.q, g * kLanes * g_.element_bytes, g_.row_bytes);
      }
      w_.line("mxu.mm mxu{}, v{}, {}", mxu_scores_, sc, i);
      w_.line("saddi s{}, s{}, {}", st.q, st.q, ways * kSublanes * g_.row_bytes);
    }
  });
  release_streams(streams);
  for (int x : {t, diag, last_key}) r.release(x);
}

// (B') multi-pass: p's parts (kept in the tiles' records) times v's parts, weights loaded once
// per v part for the chunk.
void AttentionBuilder::probabilities_times_values(int tiles) {
  const LhsTiles probabilities{[&](int p) { w_.load_immediate(p, state_vmem_ + kStateAcc + group_ * kVregBytes); }, "vld",
                               kVregBytes, kRowOfVreg, record_bytes_};
  products_by_part(tiles, mxu_values_, vp_vmem_, vp_part_bytes_, chunk_tiles_, probabilities);
}

// Pipelined path: mxu.lwb of v's block `v_ahead` and k^T's block `k_ahead` (past s`base`, or
// past 0 when base < 0; clamped to the last block) into the back buffers; the next mxu.swap
// switches to them.
void AttentionBuilder::load_weights_ahead(int base, int v_ahead, int k_ahead) {
  auto& r = w_.sregs();
  const int t = r.take(), last = r.take();
  w_.load_immediate(last, g_.key_blocks - 1);
  for (auto [mxu, region, ahead] : {std::tuple{mxu_values_, vp_vmem_, v_ahead}, std::tuple{mxu_scores_, kt_vmem_, k_ahead}}) {
    if (base >= 0) w_.line("saddi s{}, s{}, {}", t, base, ahead);
    else w_.load_immediate(t, ahead);
    w_.line("smin s{}, s{}, s{}", t, t, last);
    w_.line("smuli s{}, s{}, {}", t, t, int64_t(d_) * d_ * 2);
    w_.line("saddi s{}, s{}, {}", t, t, region);
    w_.line("mxu.lwb mxu{}, s{}, {}", mxu, t, d_ * 2);
  }
  r.release(t);
  r.release(last);
}

// (C) acc = acc * alpha + p @ v, per tile (interleaved streams like (B)).
void AttentionBuilder::rescale_and_accumulate(int tiles) {
  if (pipelined_) load_weights_ahead(j_, 1, 2);
  const auto streams = take_streams(tiles, stream_ways());
  for_tiles_interleaved(tiles, streams, [&](const Stream& st, int i) {
    const int pv = st.x, alpha = st.a, acc = st.b;
    w_.line("mxu.pop v{}, mxu{}, {}", pv, mxu_values_, chunk_tiles_ + i);
    w_.line("vld v{}, m0, s{}, {}, {}", alpha, st.p, kStateAlpha, kRowOfVreg);
    for (int g = 0; g < group_; ++g) {
      w_.line("vld v{}, m0, s{}, {}, {}", acc, st.p, kStateAcc + g * kVregBytes, kRowOfVreg);
      w_.line("vfma v{}, v{}, v{}, v{}", acc, acc, alpha, pv + g);
      w_.line("vst v{}, m0, s{}, {}, {}", acc, st.p, kStateAcc + g * kVregBytes, kRowOfVreg);
    }
  });
  release_streams(streams);
}

// out = acc / l and lse = m + log(l) for the chunk's tiles, then their write-backs.
void AttentionBuilder::finish_chunk(int tiles, int64_t rows) {
  auto& r = w_.sregs();
  const int p = r.take(), o = r.take(), lo = r.take(), t = r.take();
  const int l = vregs_.take(), m = vregs_.take(), acc = vregs_.take();
  w_.load_immediate(p, state_vmem_);
  w_.line("smuli s{}, s{}, {}", o, c0_, g_.row_bytes);
  w_.line("sadd s{}, s{}, s{}", o, o, hb_);
  w_.line("saddi s{}, s{}, {}", o, o, o_off_);
  w_.line("smuli s{}, s{}, {}", lo, c0_, kRowOfVreg);
  w_.line("sadd s{}, s{}, s{}", lo, lo, hb_);
  w_.line("saddi s{}, s{}, {}", lo, lo, l_off_);
  for (int i = 0; i < tiles; ++i) {
    w_.line("vld v{}, m0, s{}, {}, {}", l, p, kStateL, kRowOfVreg);
    for (int g = 0; g < group_; ++g) {
      w_.line("vld v{}, m0, s{}, {}, {}", acc, p, kStateAcc + g * kVregBytes, kRowOfVreg);
      w_.line("vdiv v{}, v{}, v{}", acc, acc, l);
      w_.line("{} v{}, m0, s{}, {}, {}", store_mnemonic(s_.dtype), acc, o, g * kLanes * g_.element_bytes, g_.row_bytes);
    }
    if (s_.write_lse) {
      w_.line("vld v{}, m0, s{}, {}, {}", m, p, kStateM, kRowOfVreg);
      w_.line("vlog v{}, v{}", l, l);
      w_.line("vadd v{}, v{}, v{}", l, l, m);
      w_.line("vst v{}, m0, s{}, 0, {}", l, lo, kRowOfVreg);
    }
    w_.line("saddi s{}, s{}, {}", p, p, record_bytes_);
    w_.line("saddi s{}, s{}, {}", o, o, kSublanes * g_.row_bytes);
    w_.line("saddi s{}, s{}, {}", lo, lo, kVregBytes);
  }
  for (int x : {l, m, acc}) vregs_.release(x);
  // write-backs: rows c0 .. c0 + rows - 1 of this head
  const int hbm = r.take(), n = r.take(), rb = r.take(), vs = r.take();
  w_.line("smuli s{}, s{}, {}", t, bh_, s_.q_len);
  w_.line("sadd s{}, s{}, s{}", t, t, c0_);  // the chunk's first row, counted over all heads
  w_.load_immediate(n, rows);
  w_.line("smuli s{}, s{}, {}", o, c0_, g_.row_bytes);
  w_.line("sadd s{}, s{}, s{}", o, o, hb_);
  w_.line("saddi s{}, s{}, {}", o, o, o_off_);
  w_.line("sarg s{}, {}", hbm, out_arg_);
  w_.add_scaled(hbm, t, s_.head_dim * g_.element_bytes, p);
  w_.load_immediate(rb, s_.head_dim * g_.element_bytes);
  w_.load_immediate(vs, g_.row_bytes);
  w_.dma_to_hbm(1, kSemOutput, {.vmem = o, .hbm = hbm, .rows = n, .row_bytes = rb, .vmem_stride = vs, .hbm_stride = rb});
  if (s_.write_lse) {
    w_.line("smuli s{}, s{}, {}", lo, c0_, kRowOfVreg);
    w_.line("sadd s{}, s{}, s{}", lo, lo, hb_);
    w_.line("saddi s{}, s{}, {}", lo, lo, l_off_);
    w_.line("sarg s{}, {}", hbm, out_arg_);
    w_.line("saddi s{}, s{}, {}", hbm, hbm, attention_lse_offset(s_));
    w_.add_scaled(hbm, t, 4, p);
    w_.load_immediate(rb, 4);
    w_.load_immediate(vs, kRowOfVreg);
    w_.dma_to_hbm(1, kSemOutput, {.vmem = lo, .hbm = hbm, .rows = n, .row_bytes = rb, .vmem_stride = vs, .hbm_stride = rb});
  }
  for (int x : {p, o, lo, t, hbm, n, rb, vs}) r.release(x);
}

}  // namespace vtpu::kernels::attention_detail
