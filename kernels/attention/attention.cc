// Schedule (one TensorCore), head by head (a batch entry):
//  - The head's q, k and v land in VMEM, each row padded to the MXU width D (the padding is never
//    written, so it stays zero); the next head's are fetched meanwhile into a second buffer (sem0).
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
#include "kernels/attention/attention.h"

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

namespace vtpu::kernels {
namespace {

constexpr int kSemInput = 0, kSemOutput = 1;
constexpr int64_t kVregBytes = kSublanes * kLanes * 4;
constexpr int64_t kRowOfVreg = kLanes * 4;  // bytes between sublanes of a vreg kept whole in VMEM
// A query tile's state record: m, l, alpha, then acc and (multi-pass) p, each a vreg per 128 lanes.
constexpr int64_t kStateM = 0, kStateL = kVregBytes, kStateAlpha = 2 * kVregBytes, kStateAcc = 3 * kVregBytes;

class AttentionBuilder {
 public:
  AttentionBuilder(const AttentionSpec& spec, const sim::ChipConfig& chip) : s_(spec), chip_(chip), w_("attention") {}

  isa::Program build() {
    validate();
    plan();
    emit();
    w_.target_mxu(chip_.mxu_dim);
    return w_.assemble();
  }

  // What build() checks before it emits anything: the shape and that a head fits VMEM.
  void check() {
    validate();
    plan();
  }

 private:
  void validate() const {
    if (s_.batch < 1 || s_.q_len < 1 || s_.kv_len < 1 || s_.head_dim < 1) {
      throw KernelError("attention: every size must be at least 1");
    }
    if (s_.dtype != DType::F32 && s_.dtype != DType::BF16) {
      throw KernelError(fmt::format("attention: {} inputs are not supported (f32 or bf16)", dtype_name(s_.dtype)));
    }
    if (s_.head_dim > chip_.mxu_dim) {
      throw KernelError(fmt::format("attention: head_dim {} is wider than {}'s MXU ({})", s_.head_dim, chip_.name, chip_.mxu_dim));
    }
    if (!std::isfinite(s_.scale)) throw KernelError("attention: the scale must be finite");
    if (s_.batch * std::max(s_.q_len, s_.kv_len) * s_.head_dim * 4 >= (int64_t{1} << 31)) {
      throw KernelError("attention: operands too large for one launch");
    }
    if (chip_.mxu_acc_slots < 2) throw KernelError("attention: the MXU needs at least two accumulator slots");
  }

  void plan() {
    d_ = chip_.mxu_dim;
    group_ = d_ / kLanes;
    eb_ = dtype_bytes(s_.dtype);
    row_bytes_ = int64_t(d_) * eb_;
    s_pad_ = round_up(s_.q_len, kSublanes);
    t_pad_ = round_up(s_.kv_len, d_);
    key_blocks_ = t_pad_ / d_;
    head_lane_blocks_ = (s_.head_dim + kLanes - 1) / kLanes;
    chunk_tiles_ = std::min(32, chip_.mxu_acc_slots / 2);
    const int64_t chunk_rows = int64_t(chunk_tiles_) * kSublanes;
    full_chunks_ = s_.q_len / chunk_rows;
    last_rows_ = s_.q_len % chunk_rows;
    chunks_ = full_chunks_ + (last_rows_ > 0);
    parts_ = bf16_part_count(s_.dtype, s_.passes);
    pairs_ = mxu_pass_pairs(s_.dtype == DType::F32 ? s_.passes : 1);
    ragged_keys_ = t_pad_ != s_.kv_len;
    pipelined_ = parts_ == 1 && chip_.mxu_per_core >= 2;
    mxu_scores_ = 0;
    mxu_values_ = chip_.mxu_per_core > 1 ? 1 : 0;
    record_bytes_ = (3 + group_ * (parts_ > 1 ? 2 : 1)) * kVregBytes;

    uint64_t next = 0;
    const auto place = [&](uint64_t bytes) {
      const uint64_t at = next;
      next += round_up(static_cast<int64_t>(bytes), 512);
      return at;
    };
    // One head's buffer; the second is the same layout head_bytes_ further on.
    q_off_ = place(s_pad_ * row_bytes_);
    k_off_ = place(t_pad_ * row_bytes_);
    v_off_ = place(t_pad_ * row_bytes_);
    o_off_ = place(s_pad_ * row_bytes_);
    if (s_.write_lse) l_off_ = place(s_pad_ * kRowOfVreg);
    head_bytes_ = int64_t(next);
    next *= 2;
    kt_part_bytes_ = key_blocks_ * d_ * d_ * 2;
    vp_part_bytes_ = t_pad_ * d_ * 2;
    kt_vmem_ = place(parts_ * kt_part_bytes_);
    vp_vmem_ = place(parts_ * vp_part_bytes_);
    state_vmem_ = place(chunk_tiles_ * record_bytes_);
    if (next > chip_.kernel_vmem_bytes()) {
      throw KernelError(fmt::format("attention: a head of {} queries and {} keys needs {} bytes of VMEM, {} has {}", s_.q_len,
                                    s_.kv_len, next, chip_.name, chip_.kernel_vmem_bytes()));
    }
    q_arg_ = w_.argument("q", isa::ArgumentKind::Buffer);
    k_arg_ = w_.argument("k", isa::ArgumentKind::Buffer);
    v_arg_ = w_.argument("v", isa::ArgumentKind::Buffer);
    out_arg_ = w_.argument("out", isa::ArgumentKind::Buffer);
  }

  void emit() {
    auto& r = w_.sregs();
    bh_ = r.take();
    hb_ = r.take();
    const int t = r.take(), heads = r.take();
    w_.line("sli s{}, 0", bh_);
    w_.line("sli s{}, 0", hb_);
    issue_inputs(bh_, hb_);
    signal_outputs(2 * dmas_per_head());  // the two heads "before" the first have nothing in flight
    c_ = emit_attention_constants(w_, vregs_, s_, ragged_keys_, t);
    w_.load_immediate(heads, s_.batch);
    const std::string head_loop = w_.new_label("head"), no_prefetch = w_.new_label("no_prefetch");
    w_.place(head_loop);
    w_.line("sem.wait sem{}, 3", kSemInput);
    w_.line("saddi s{}, s{}, 1", t, bh_);
    w_.line("bge s{}, s{}, {}", t, heads, no_prefetch);
    const int other = r.take();
    w_.load_immediate(other, head_bytes_);
    w_.line("ssub s{}, s{}, s{}", other, other, hb_);
    issue_inputs(t, other);
    r.release(other);
    w_.place(no_prefetch);
    wait_outputs(dmas_per_head());  // this buffer's writes from two heads ago
    build_key_weights();
    build_value_weights();
    c0_ = r.take();
    w_.line("sli s{}, 0", c0_);
    const int64_t chunk_rows = int64_t(chunk_tiles_) * kSublanes;
    if (full_chunks_ > 0) {
      const std::string chunk_loop = w_.new_label("chunk");
      w_.place(chunk_loop);
      emit_chunk(chunk_tiles_, chunk_rows);
      w_.line("saddi s{}, s{}, {}", c0_, c0_, chunk_rows);
      w_.load_immediate(t, full_chunks_ * chunk_rows);
      w_.line("blt s{}, s{}, {}", c0_, t, chunk_loop);
    }
    if (last_rows_ > 0) emit_chunk(static_cast<int>((last_rows_ + kSublanes - 1) / kSublanes), last_rows_);
    r.release(c0_);
    w_.line("saddi s{}, s{}, 1", bh_, bh_);
    w_.load_immediate(t, head_bytes_);
    w_.line("ssub s{}, s{}, s{}", hb_, t, hb_);
    w_.line("blt s{}, s{}, {}", bh_, heads, head_loop);
    for (int x : {bh_, hb_, t, heads}) r.release(x);
  }

  int64_t dmas_per_head() const { return chunks_ * (s_.write_lse ? 2 : 1); }

  void signal_outputs(int64_t n) {
    for (; n > 0; n -= 255) w_.line("sem.signal sem{}, {}", kSemOutput, std::min<int64_t>(n, 255));
  }
  void wait_outputs(int64_t n) {
    for (; n > 0; n -= 255) w_.line("sem.wait sem{}, {}", kSemOutput, std::min<int64_t>(n, 255));
  }



  // q, k and v of head s`head` into the head buffer at s`buffer`.
  void issue_inputs(int head, int buffer) {
    auto& r = w_.sregs();
    const int hbm = r.take(), vm = r.take(), rows = r.take(), rb = r.take(), vs = r.take(), t = r.take();
    w_.load_immediate(rb, s_.head_dim * eb_);
    w_.load_immediate(vs, row_bytes_);
    const std::pair<int, int64_t> q{q_arg_, q_off_}, k{k_arg_, k_off_}, v{v_arg_, v_off_};
    for (auto [arg, off] : {q, k, v}) {
      const int64_t len = arg == q_arg_ ? s_.q_len : s_.kv_len;
      w_.line("sarg s{}, {}", hbm, arg);
      w_.line("smuli s{}, s{}, {}", t, head, len * s_.head_dim * eb_);
      w_.line("sadd s{}, s{}, s{}", hbm, hbm, t);
      w_.line("saddi s{}, s{}, {}", vm, buffer, off);
      w_.load_immediate(rows, len);
      w_.line("dma.h2v dq0, sem{}, s{}, s{}, s{}, s{}, s{}, s{}", kSemInput, vm, hbm, rows, rb, vs, rb);
    }
    for (int x : {hbm, vm, rows, rb, vs, t}) r.release(x);
  }

  // Writes the bf16 parts of vreg `x` to VMEM at s`addr` (+ part_stride per part), rows `stride`
  // apart (bf16_parts.h). Leaves x changed.
  void store_parts(int x, int addr, int64_t part_stride, int64_t stride) {
    store_bf16_parts(w_, vregs_, x, addr, 0, parts_, part_stride, stride);
  }

  // k^T weights: key block j's part p is a D x D block (row = head dim, column = key) at
  // kt_vmem_ + p * kt_part_bytes_ + j * D * D * 2.
  void build_key_weights() {
    auto& r = w_.sregs();
    const int j = r.take(), n = r.take(), src = r.take(), dst = r.take(), a = r.take(), o = r.take();
    const std::string loop = w_.new_label("key_weights");
    w_.line("sli s{}, 0", j);
    w_.load_immediate(n, key_blocks_);
    w_.line("saddi s{}, s{}, {}", src, hb_, k_off_);
    w_.load_immediate(dst, kt_vmem_);
    w_.place(loop);
    const int block = vregs_.take_run(16);
    for (int kb = 0; kb < group_; ++kb) {
      for (int hd = 0; hd < head_lane_blocks_; ++hd) {
        w_.line("saddi s{}, s{}, {}", a, src, kb * kLanes * row_bytes_ + hd * kLanes * eb_);
        for (int v = 0; v < 16; ++v) {
          w_.line("{} v{}, m0, s{}, 0, {}", load_mnemonic(s_.dtype), block + v, a, row_bytes_);
          w_.line("saddi s{}, s{}, {}", a, a, kSublanes * row_bytes_);
        }
        w_.line("vtrans v{}, v{}", block, block);
        w_.line("saddi s{}, s{}, {}", o, dst, int64_t(hd) * kLanes * d_ * 2 + kb * kLanes * 2);
        for (int v = 0; v < 16; ++v) {
          store_parts(block + v, o, kt_part_bytes_, d_ * 2);
          w_.line("saddi s{}, s{}, {}", o, o, kSublanes * d_ * 2);
        }
      }
    }
    vregs_.release_run(block, 16);
    w_.line("saddi s{}, s{}, {}", src, src, d_ * row_bytes_);
    w_.line("saddi s{}, s{}, {}", dst, dst, int64_t(d_) * d_ * 2);
    w_.line("saddi s{}, s{}, 1", j, j);
    w_.line("blt s{}, s{}, {}", j, n, loop);
    for (int x : {j, n, src, dst, a, o}) r.release(x);
  }

  // v weights: part p of key row t at vp_vmem_ + p * vp_part_bytes_ + t * D * 2 (key block j's
  // weights are rows j*D .. j*D + D - 1). Rows past kv_len stay zero.
  void build_value_weights() {
    auto& r = w_.sregs();
    const int i = r.take(), n = r.take(), src = r.take(), dst = r.take(), o = r.take();
    const std::string loop = w_.new_label("value_weights");
    w_.line("sli s{}, 0", i);
    w_.load_immediate(n, round_up(s_.kv_len, kSublanes) / kSublanes);
    w_.line("saddi s{}, s{}, {}", src, hb_, v_off_);
    w_.load_immediate(dst, vp_vmem_);
    w_.place(loop);
    const int x = vregs_.take();
    for (int hd = 0; hd < head_lane_blocks_; ++hd) {
      w_.line("{} v{}, m0, s{}, {}, {}", load_mnemonic(s_.dtype), x, src, hd * kLanes * eb_, row_bytes_);
      w_.line("saddi s{}, s{}, {}", o, dst, hd * kLanes * 2);
      store_parts(x, o, vp_part_bytes_, d_ * 2);
    }
    vregs_.release(x);
    w_.line("saddi s{}, s{}, {}", src, src, kSublanes * row_bytes_);
    w_.line("saddi s{}, s{}, {}", dst, dst, kSublanes * d_ * 2);
    w_.line("saddi s{}, s{}, 1", i, i);
    w_.line("blt s{}, s{}, {}", i, n, loop);
    for (int x2 : {i, n, src, dst, o}) r.release(x2);
  }

  // One chunk of `tiles` query tiles (`rows` real rows) starting at query row s`c0_`.
  void emit_chunk(int tiles, int64_t rows) {
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
      w_.load_immediate(u, key_blocks_);
      w_.line("smin s{}, s{}, s{}", jend, t, u);
    } else {
      w_.load_immediate(jend, key_blocks_);
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
      if (parts_ > 1) probabilities_times_values(tiles);
    }
    rescale_and_accumulate(tiles);
    w_.line("saddi s{}, s{}, 1", j_, j_);
    w_.line("blt s{}, s{}, {}", j_, jend, block_loop);
    r.release(jend);
    r.release(j_);
    finish_chunk(tiles, rows);
  }

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
  void products_by_part(int tiles, int mxu, int64_t region, int64_t part_bytes, int slot0, const LhsTiles& lhs) {
    auto& r = w_.sregs();
    const int cursor = r.take(), t = r.take();
    const int x = vregs_.take_run(group_, group_);
    for (int b = 0; b < parts_; ++b) {
      std::vector<int> lhs_parts;
      for (auto [lp, wp] : pairs_) if (wp == b) lhs_parts.push_back(lp);
      if (lhs_parts.empty()) continue;
      w_.line("smuli s{}, s{}, {}", t, j_, int64_t(d_) * d_ * 2);
      w_.line("saddi s{}, s{}, {}", t, t, region + b * part_bytes);
      w_.line("mxu.lw mxu{}, s{}, {}", mxu, t, d_ * 2);
      lhs.first(cursor);
      for (int i = 0; i < tiles; ++i) {
        for (int g = 0; g < group_; ++g) {
          w_.line("{} v{}, m0, s{}, {}, {}", lhs.load, x + g, cursor, g * lhs.group_step, lhs.row_stride);
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
    vregs_.release_run(x, group_);
    r.release(cursor);
    r.release(t);
  }

  // (A) scores of every tile into scores-MXU slot i, weights loaded once per k^T part.
  void scores(int tiles) {
    const LhsTiles queries{[&](int q) {
                             w_.line("smuli s{}, s{}, {}", q, c0_, row_bytes_);
                             w_.line("sadd s{}, s{}, s{}", q, q, hb_);
                             w_.line("saddi s{}, s{}, {}", q, q, q_off_);
                           },
                           load_mnemonic(s_.dtype), kLanes * eb_, row_bytes_, kSublanes * row_bytes_};
    products_by_part(tiles, mxu_scores_, kt_vmem_, kt_part_bytes_, 0, queries);
  }

  // Registers of one of the interleaved per-tile instruction streams of phases (B) and (C).
  struct Stream {
    int p = -1, t = -1;             // the tile's state record; a scratch scalar
    int q = -1;                     // the tile's query rows (when the stream pushes scores)
    int x = -1;                     // a group: the scores, then p (B); the products (C)
    int a = -1, b = -1, c = -1;     // single vregs
    int mask = 1;
  };

  // Up to `ways` streams (as many as the registers hold), each starting at tile k's record.
  std::vector<Stream> take_streams(int tiles, int ways, bool with_queries = false) {
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
      w_.line("smuli s{}, s{}, {}", st.q, c0_, row_bytes_);
      w_.line("sadd s{}, s{}, s{}", st.q, st.q, hb_);
      w_.line("saddi s{}, s{}, {}", st.q, st.q, q_off_ + int64_t(k) * kSublanes * row_bytes_);
    }
    return streams;
  }
  void release_streams(const std::vector<Stream>& streams) {
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
  void for_tiles_interleaved(int tiles, const std::vector<Stream>& streams, const std::function<void(const Stream&, int)>& body) {
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

  // As many streams as the registers hold next to the constants (5 vregs): each takes the group
  // and 3 vregs, a mask register and 3 scalars. More streams hide more of a chain's latency.
  int stream_ways() const { return group_ == 1 ? 6 : 5; }

  // (B) per tile: scores scaled and masked, m, l and alpha updated, p = exp(s - m) pushed through
  // the values MXU (one pass) or kept for the multi-pass products. Tiles run as interleaved
  // streams: each tile's chain (reductions, exponentials) is long and serial.
  void softmax_update(int tiles, bool next_scores) {
    auto& r = w_.sregs();
    const int t = r.take(), diag = r.take(), last_key = r.take();
    if (pipelined_) {
      w_.line("mxu.swap mxu{}", mxu_values_);
      if (next_scores) w_.line("mxu.swap mxu{}", mxu_scores_);  // block j + 1's k^T
    } else if (parts_ == 1) {
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
        if (ragged_keys_) mask_keys_past(w_, c_, sc + g, last_key, -int64_t(g) * kLanes, c_.lane, th, st.t, st.mask);
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
      if (parts_ == 1) {
        w_.line("mxu.mm mxu{}, v{}, {}", mxu_values_, sc, chunk_tiles_ + i);
      } else {
        for (int g = 0; g < group_; ++g) {
          w_.line("vst v{}, m0, s{}, {}, {}", sc + g, p, kStateAcc + (group_ + g) * kVregBytes, kRowOfVreg);
        }
      }
      if (next_scores) {  // this tile's scores against block j + 1, into the slot just popped
        for (int g = 0; g < group_; ++g) {
          w_.line("{} v{}, m0, s{}, {}, {}", load_mnemonic(s_.dtype), sc + g, st.q, g * kLanes * eb_, row_bytes_);
        }
        w_.line("mxu.mm mxu{}, v{}, {}", mxu_scores_, sc, i);
        w_.line("saddi s{}, s{}, {}", st.q, st.q, ways * kSublanes * row_bytes_);
      }
    });
    release_streams(streams);
    for (int x : {t, diag, last_key}) r.release(x);
  }

  // (B') multi-pass: p's parts (kept in the tiles' records) times v's parts, weights loaded once
  // per v part for the chunk.
  void probabilities_times_values(int tiles) {
    const LhsTiles probabilities{[&](int p) { w_.load_immediate(p, state_vmem_ + kStateAcc + group_ * kVregBytes); }, "vld",
                                 kVregBytes, kRowOfVreg, record_bytes_};
    products_by_part(tiles, mxu_values_, vp_vmem_, vp_part_bytes_, chunk_tiles_, probabilities);
  }

  // Pipelined path: mxu.lwb of v's block `v_ahead` and k^T's block `k_ahead` (past s`base`, or
  // past 0 when base < 0; clamped to the last block) into the back buffers; the next mxu.swap
  // switches to them.
  void load_weights_ahead(int base, int v_ahead, int k_ahead) {
    auto& r = w_.sregs();
    const int t = r.take(), last = r.take();
    w_.load_immediate(last, key_blocks_ - 1);
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
  void rescale_and_accumulate(int tiles) {
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
  void finish_chunk(int tiles, int64_t rows) {
    auto& r = w_.sregs();
    const int p = r.take(), o = r.take(), lo = r.take(), t = r.take();
    const int l = vregs_.take(), m = vregs_.take(), acc = vregs_.take();
    w_.load_immediate(p, state_vmem_);
    w_.line("smuli s{}, s{}, {}", o, c0_, row_bytes_);
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
        w_.line("{} v{}, m0, s{}, {}, {}", store_mnemonic(s_.dtype), acc, o, g * kLanes * eb_, row_bytes_);
      }
      if (s_.write_lse) {
        w_.line("vld v{}, m0, s{}, {}, {}", m, p, kStateM, kRowOfVreg);
        w_.line("vlog v{}, v{}", l, l);
        w_.line("vadd v{}, v{}, v{}", l, l, m);
        w_.line("vst v{}, m0, s{}, 0, {}", l, lo, kRowOfVreg);
      }
      w_.line("saddi s{}, s{}, {}", p, p, record_bytes_);
      w_.line("saddi s{}, s{}, {}", o, o, kSublanes * row_bytes_);
      w_.line("saddi s{}, s{}, {}", lo, lo, kVregBytes);
    }
    for (int x : {l, m, acc}) vregs_.release(x);
    // write-backs: rows c0 .. c0 + rows - 1 of this head
    const int hbm = r.take(), n = r.take(), rb = r.take(), vs = r.take();
    w_.line("smuli s{}, s{}, {}", t, bh_, s_.q_len);
    w_.line("sadd s{}, s{}, s{}", t, t, c0_);  // the chunk's first row, counted over all heads
    w_.load_immediate(n, rows);
    w_.line("smuli s{}, s{}, {}", o, c0_, row_bytes_);
    w_.line("sadd s{}, s{}, s{}", o, o, hb_);
    w_.line("saddi s{}, s{}, {}", o, o, o_off_);
    w_.line("sarg s{}, {}", hbm, out_arg_);
    w_.add_scaled(hbm, t, s_.head_dim * eb_, p);
    w_.load_immediate(rb, s_.head_dim * eb_);
    w_.load_immediate(vs, row_bytes_);
    w_.line("dma.v2h dq1, sem{}, s{}, s{}, s{}, s{}, s{}, s{}", kSemOutput, o, hbm, n, rb, vs, rb);
    if (s_.write_lse) {
      w_.line("smuli s{}, s{}, {}", lo, c0_, kRowOfVreg);
      w_.line("sadd s{}, s{}, s{}", lo, lo, hb_);
      w_.line("saddi s{}, s{}, {}", lo, lo, l_off_);
      w_.line("sarg s{}, {}", hbm, out_arg_);
      w_.line("saddi s{}, s{}, {}", hbm, hbm, attention_lse_offset(s_));
      w_.add_scaled(hbm, t, 4, p);
      w_.load_immediate(rb, 4);
      w_.load_immediate(vs, kRowOfVreg);
      w_.line("dma.v2h dq1, sem{}, s{}, s{}, s{}, s{}, s{}, s{}", kSemOutput, lo, hbm, n, rb, vs, rb);
    }
    for (int x : {p, o, lo, t, hbm, n, rb, vs}) r.release(x);
  }

  const AttentionSpec& s_;
  const sim::ChipConfig& chip_;
  AsmWriter w_;
  RegisterPool vregs_{"vector registers", 0, 31};
  int d_ = 0, group_ = 0, eb_ = 4, chunk_tiles_ = 0, parts_ = 1, head_lane_blocks_ = 1;
  int64_t row_bytes_ = 0, s_pad_ = 0, t_pad_ = 0, key_blocks_ = 0, full_chunks_ = 0, last_rows_ = 0, chunks_ = 0;
  int64_t record_bytes_ = 0, head_bytes_ = 0, kt_part_bytes_ = 0, vp_part_bytes_ = 0;
  int64_t q_off_ = 0, k_off_ = 0, v_off_ = 0, o_off_ = 0, l_off_ = 0, kt_vmem_ = 0, vp_vmem_ = 0, state_vmem_ = 0;
  std::vector<std::pair<int, int>> pairs_;
  bool ragged_keys_ = false, pipelined_ = false;
  int mxu_scores_ = 0, mxu_values_ = 0;
  int q_arg_ = 0, k_arg_ = 0, v_arg_ = 0, out_arg_ = 0;
  int bh_ = -1, hb_ = -1, c0_ = -1, j_ = -1;
  AttentionConstants c_;
};

}  // namespace

isa::Program make_attention(const AttentionSpec& spec, const sim::ChipConfig& chip) {
  return AttentionBuilder(spec, chip).build();
}

std::string attention_unsupported(const AttentionSpec& spec, const sim::ChipConfig& chip) {
  try {
    AttentionBuilder(spec, chip).check();
  } catch (const KernelError& e) {
    return e.what();
  }
  return "";
}

}  // namespace vtpu::kernels
