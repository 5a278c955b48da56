// Schedule (one TensorCore), head by head:
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
#include "kernels/attention/attention_backward.h"

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

namespace vtpu::kernels {
namespace {

constexpr int kSemInput = 0, kSemOutput = 1;
constexpr int kBlock = 128;  // keys per key block, queries per query block: one MXU width
constexpr int kTiles = kBlock / kSublanes;
constexpr int64_t kVregBytes = kSublanes * kLanes * 4, kRowOfVreg = kLanes * 4;
constexpr int kScores = 0, kDp = 1, kDq = 2, kTransposed = 3;  // MXUs

class AttentionBackwardBuilder {
 public:
  AttentionBackwardBuilder(const AttentionSpec& spec, const sim::ChipConfig& chip) : s_(spec), chip_(chip), w_("attention_backward") {}

  void check() {
    if (s_.batch < 1 || s_.q_len < 1 || s_.kv_len < 1 || s_.head_dim < 1) throw KernelError("attention backward: every size must be at least 1");
    if (s_.dtype != DType::F32 && s_.dtype != DType::BF16) {
      throw KernelError(fmt::format("attention backward: {} inputs are not supported (f32 or bf16)", dtype_name(s_.dtype)));
    }
    if (s_.dtype == DType::F32 && s_.passes != 1 && s_.passes != 3 && s_.passes != 6) {
      throw KernelError(fmt::format("attention backward: {} MXU passes (1, 3 or 6)", s_.passes));
    }
    if ((chip_.mxu_dim != kBlock && chip_.mxu_dim != 2 * kBlock) || chip_.mxu_per_core < 4 ||
        chip_.mxu_acc_slots < (chip_.mxu_dim == kBlock ? 2 : 1) * kTiles) {
      throw KernelError(fmt::format("attention backward: written for four 128- or 256-wide MXUs per core ({} has {} of {})",
                                    chip_.name, chip_.mxu_per_core, chip_.mxu_dim));
    }
    if (s_.head_dim > kBlock) throw KernelError(fmt::format("attention backward: head_dim {} is over 128", s_.head_dim));
    if (!std::isfinite(s_.scale)) throw KernelError("attention backward: the scale must be finite");
    if (s_.batch * (s_.q_len + 2 * s_.kv_len) * s_.head_dim * 4 >= (int64_t{1} << 31)) {
      throw KernelError("attention backward: operands too large for one launch");
    }
    plan();
  }

  isa::Program build() {
    check();
    emit();
    w_.target_mxu(chip_.mxu_dim);
    return w_.assemble();
  }

 private:
  void plan() {
    paired_ = chip_.mxu_dim == 2 * kBlock;
    parts_ = bf16_part_count(s_.dtype, s_.passes);
    pairs_ = mxu_pass_pairs(s_.dtype == DType::F32 ? s_.passes : 1);
    weight_row_ = chip_.mxu_dim * 2;
    weight_block_ = chip_.mxu_dim * weight_row_;
    eb_ = dtype_bytes(s_.dtype);
    row_bytes_ = kBlock * eb_;
    s_pad_ = round_up(s_.q_len, kBlock);
    t_pad_ = round_up(s_.kv_len, kBlock);
    key_blocks_ = t_pad_ / kBlock;
    full_query_blocks_ = s_.q_len / kBlock;
    last_rows_ = s_.q_len % kBlock;
    ragged_keys_ = t_pad_ != s_.kv_len;
    uint64_t next = 0;
    const auto place = [&](uint64_t bytes) {
      const uint64_t at = next;
      next += round_up(static_cast<int64_t>(bytes), 512);
      return int64_t(at);
    };
    q_ = place(s_pad_ * row_bytes_);
    k_ = place(t_pad_ * row_bytes_);
    v_ = place(t_pad_ * row_bytes_);
    o_ = place(s_pad_ * row_bytes_);
    do_ = place(s_pad_ * row_bytes_);
    lse_ = place(s_pad_ * 4 + kRowOfVreg + 64);  // a vld at stride 4 reads 512 bytes past its row
    // Weights: one MXU-sized block per key block (k^T, v^T, k rows) or query block (q and dout
    // rows); paired, v^T and q sit in the bottom-right quadrant of k^T's and dout's blocks.
    const int64_t diagonal = kBlock * weight_row_ + kBlock * 2;
    // Part b of each weight at b * key_part_ (per key block) or b * query_part_ (per query block).
    key_part_ = key_blocks_ * weight_block_;
    query_part_ = s_pad_ / kBlock * weight_block_;
    kt_ = place(parts_ * key_part_);
    vt_ = paired_ ? kt_ + diagonal : place(parts_ * key_part_);
    kw_ = place(parts_ * key_part_);
    dow_ = place(parts_ * query_part_);
    qw_ = paired_ ? dow_ + diagonal : place(parts_ * query_part_);
    rows_ = place(s_pad_ / kSublanes * 2 * kVregBytes);  // per tile: lse broadcast, delta
    dq_acc_ = place(s_pad_ * kRowOfVreg);
    p_stage_ = place(kBlock * kRowOfVreg);
    ds_stage_ = place(kBlock * kRowOfVreg);
    dq_out_ = place(s_pad_ * row_bytes_);
    dk_out_ = place(t_pad_ * row_bytes_);
    dv_out_ = place(t_pad_ * row_bytes_);
    if (next > chip_.kernel_vmem_bytes()) {
      throw KernelError(fmt::format("attention backward: a head of {} queries and {} keys needs {} bytes of VMEM, {} has {}",
                                    s_.q_len, s_.kv_len, next, chip_.name, chip_.kernel_vmem_bytes()));
    }
  }

  void emit() {
    for (const char* name : {"q", "k", "v", "out", "dout"}) args_.push_back(w_.argument(name, isa::ArgumentKind::Buffer));
    lse_arg_ = w_.argument("lse", isa::ArgumentKind::Buffer);
    grads_arg_ = w_.argument("grads", isa::ArgumentKind::Buffer);
    auto& r = w_.sregs();
    bh_ = r.take();
    const int heads = r.take(), t = r.take();
    c_ = emit_attention_constants(w_, vregs_, s_, ragged_keys_, t);
    w_.line("sli s{}, 0", bh_);
    w_.load_immediate(heads, s_.batch);
    const std::string head_loop = w_.new_label("head");
    w_.place(head_loop);
    load_head();
    transposed_weights(k_, kt_);
    transposed_weights(v_, vt_);
    row_weights(k_, kw_, t_pad_, key_part_);
    row_weights(q_, qw_, s_pad_, query_part_);
    row_weights(do_, dow_, s_pad_, query_part_);
    row_state();
    clear_dq();
    key_blocks();
    write_back();
    w_.line("saddi s{}, s{}, 1", bh_, bh_);
    w_.line("blt s{}, s{}, {}", bh_, heads, head_loop);
    for (int x : {bh_, heads, t}) r.release(x);
  }



  // The head's six inputs into VMEM; waits for them (the previous head's write-backs have landed).
  void load_head() {
    auto& r = w_.sregs();
    const int hbm = r.take(), vm = r.take(), rows = r.take(), rb = r.take(), vs = r.take(), t = r.take();
    w_.load_immediate(rb, s_.head_dim * eb_);
    w_.load_immediate(vs, row_bytes_);
    const int64_t at[] = {q_, k_, v_, o_, do_};
    const int64_t lens[] = {s_.q_len, s_.kv_len, s_.kv_len, s_.q_len, s_.q_len};
    for (int i = 0; i < 5; ++i) {
      w_.line("sarg s{}, {}", hbm, args_[i]);
      w_.line("smuli s{}, s{}, {}", t, bh_, lens[i] * s_.head_dim * eb_);
      w_.line("sadd s{}, s{}, s{}", hbm, hbm, t);
      w_.load_immediate(vm, at[i]);
      w_.load_immediate(rows, lens[i]);
      w_.line("dma.h2v dq0, sem{}, s{}, s{}, s{}, s{}, s{}, s{}", kSemInput, vm, hbm, rows, rb, vs, rb);
    }
    w_.line("sarg s{}, {}", hbm, lse_arg_);
    w_.line("smuli s{}, s{}, {}", t, bh_, s_.q_len * 4);
    w_.line("sadd s{}, s{}, s{}", hbm, hbm, t);
    w_.load_immediate(vm, lse_);
    w_.line("sli s{}, 1", rows);
    w_.load_immediate(rb, s_.q_len * 4);
    w_.line("dma.h2v dq0, sem{}, s{}, s{}, s{}, s{}, s{}, s{}", kSemInput, vm, hbm, rows, rb, rb, rb);
    w_.line("sem.wait sem{}, 6", kSemInput);
    for (int x : {hbm, vm, rows, rb, vs, t}) r.release(x);
  }

  // Per key block: the 128 x 128 block of rows j*128.. of `src` transposed into bf16 weights.
  void transposed_weights(int64_t src_at, int64_t dst_at) {
    auto& r = w_.sregs();
    const int j = r.take(), n = r.take(), src = r.take(), dst = r.take(), a = r.take();
    const std::string loop = w_.new_label("transposed_weights");
    w_.line("sli s{}, 0", j);
    w_.load_immediate(n, key_blocks_);
    w_.load_immediate(src, src_at);
    w_.load_immediate(dst, dst_at);
    w_.place(loop);
    const int block = vregs_.take_run(16, 16);
    w_.line("smov s{}, s{}", a, src);
    for (int v = 0; v < 16; ++v) {
      w_.line("{} v{}, m0, s{}, 0, {}", load_mnemonic(s_.dtype), block + v, a, row_bytes_);
      w_.line("saddi s{}, s{}, {}", a, a, kSublanes * row_bytes_);
    }
    w_.line("vtrans v{}, v{}", block, block);
    w_.line("smov s{}, s{}", a, dst);
    for (int v = 0; v < 16; ++v) {
      store_parts(block + v, a, key_part_);
      w_.line("saddi s{}, s{}, {}", a, a, kSublanes * weight_row_);
    }
    vregs_.release_run(block, 16);
    w_.line("saddi s{}, s{}, {}", src, src, kBlock * row_bytes_);
    w_.line("saddi s{}, s{}, {}", dst, dst, weight_block_);
    w_.line("saddi s{}, s{}, 1", j, j);
    w_.line("blt s{}, s{}, {}", j, n, loop);
    for (int x : {j, n, src, dst, a}) r.release(x);
  }

  // Vreg `x` as bf16 weight rows at s`addr`, its parts `part_stride` apart (bf16_parts.h).
  // Leaves x changed.
  void store_parts(int x, int addr, int64_t part_stride) {
    store_bf16_parts(w_, vregs_, x, addr, 0, parts_, part_stride, weight_row_);
  }

  // The LHS parts paired with weight part b, in increasing order (each peeled from the last).
  std::vector<int> lhs_parts(int b) const {
    std::vector<int> out;
    for (auto [lp, wp] : pairs_) if (wp == b) out.push_back(lp);
    std::sort(out.begin(), out.end());
    return out;
  }

  // The `rows` rows of `src` (a multiple of 128: padding rows are zero) as bf16 weight rows, 128
  // rows to a weight block; its parts `part_stride` apart.
  void row_weights(int64_t src_at, int64_t dst_at, int64_t rows, int64_t part_stride) {
    auto& r = w_.sregs();
    const int i = r.take(), n = r.take(), src = r.take(), dst = r.take(), a = r.take();
    const std::string loop = w_.new_label("row_weights");
    w_.line("sli s{}, 0", i);
    w_.load_immediate(n, rows / kBlock);
    w_.load_immediate(src, src_at);
    w_.load_immediate(dst, dst_at);
    w_.place(loop);
    const int x = vregs_.take();
    w_.line("smov s{}, s{}", a, dst);
    for (int v = 0; v < kTiles; ++v) {
      w_.line("{} v{}, m0, s{}, 0, {}", load_mnemonic(s_.dtype), x, src, row_bytes_);
      store_parts(x, a, part_stride);
      w_.line("saddi s{}, s{}, {}", src, src, kSublanes * row_bytes_);
      w_.line("saddi s{}, s{}, {}", a, a, kSublanes * weight_row_);
    }
    vregs_.release(x);
    w_.line("saddi s{}, s{}, {}", dst, dst, weight_block_);
    w_.line("saddi s{}, s{}, 1", i, i);
    w_.line("blt s{}, s{}, {}", i, n, loop);
    for (int x2 : {i, n, src, dst, a}) r.release(x2);
  }

  // Per query tile: lse broadcast along each row, and delta = rowsum(dout * out).
  void row_state() {
    auto& r = w_.sregs();
    const int i = r.take(), n = r.take(), o = r.take(), d = r.take(), l = r.take(), st = r.take();
    const std::string loop = w_.new_label("row_state");
    w_.line("sli s{}, 0", i);
    w_.load_immediate(n, s_pad_ / kSublanes);
    w_.load_immediate(o, o_);
    w_.load_immediate(d, do_);
    w_.load_immediate(l, lse_);
    w_.load_immediate(st, rows_);
    w_.place(loop);
    const int x = vregs_.take(), y = vregs_.take();
    w_.line("vld v{}, m0, s{}, 0, 4", x, l);  // sublane s: lse[s], lse[s + 1], ...
    w_.line("vbcast.lane v{}, v{}, 0", x, x);
    w_.line("vst v{}, m0, s{}, 0, {}", x, st, kRowOfVreg);
    w_.line("{} v{}, m0, s{}, 0, {}", load_mnemonic(s_.dtype), x, o, row_bytes_);
    w_.line("{} v{}, m0, s{}, 0, {}", load_mnemonic(s_.dtype), y, d, row_bytes_);
    w_.line("vmul v{}, v{}, v{}", x, x, y);
    w_.line("vredsum.lane v{}, v{}", x, x);
    w_.line("vst v{}, m0, s{}, {}, {}", x, st, kVregBytes, kRowOfVreg);
    vregs_.release(x);
    vregs_.release(y);
    w_.line("saddi s{}, s{}, {}", l, l, kSublanes * 4);
    w_.line("saddi s{}, s{}, {}", o, o, kSublanes * row_bytes_);
    w_.line("saddi s{}, s{}, {}", d, d, kSublanes * row_bytes_);
    w_.line("saddi s{}, s{}, {}", st, st, 2 * kVregBytes);
    w_.line("saddi s{}, s{}, 1", i, i);
    w_.line("blt s{}, s{}, {}", i, n, loop);
    for (int x2 : {i, n, o, d, l, st}) r.release(x2);
  }

  void clear_dq() {
    auto& r = w_.sregs();
    const int i = r.take(), n = r.take(), a = r.take();
    const std::string loop = w_.new_label("clear_dq");
    w_.line("sli s{}, 0", i);
    w_.load_immediate(n, s_pad_ / kSublanes);
    w_.load_immediate(a, dq_acc_);
    w_.place(loop);
    w_.line("vst v{}, m0, s{}, 0, {}", c_.zero, a, kRowOfVreg);
    w_.line("saddi s{}, s{}, {}", a, a, kVregBytes);
    w_.line("saddi s{}, s{}, 1", i, i);
    w_.line("blt s{}, s{}, {}", i, n, loop);
    for (int x : {i, n, a}) r.release(x);
  }

  void key_blocks() {
    auto& r = w_.sregs();
    j_ = r.take();
    c0_ = r.take();
    const int n = r.take(), t = r.take(), end = r.take();
    const std::string loop = w_.new_label("key_block"), no_ragged = w_.new_label("no_ragged_block");
    w_.line("sli s{}, 0", j_);
    w_.load_immediate(n, key_blocks_);
    w_.place(loop);
    if (parts_ == 1) {  // several parts: loaded per query block and part
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
  void load_key_weights(int mxu, int64_t at, int part, int t) {
    w_.line("smuli s{}, s{}, {}", t, j_, weight_block_);
    w_.line("saddi s{}, s{}, {}", t, t, at + part * key_part_);
    w_.line("mxu.lw mxu{}, s{}, {}", mxu, t, weight_row_);
  }

  // One query block of `tiles` tiles starting at query s`c0_`, against key block s`j_`.
  void query_block(int tiles) {
    scores_and_dp(tiles);
    probabilities_and_ds(tiles);
    if (parts_ > 1) dq_products(tiles);
    transposed_products();
    accumulate_dq(tiles);
  }

  // (1) scores q @ k^T into mxu0 slot i and dout @ v^T into mxu1 slot i (paired: both in mxu0
  // slot i), per weight part the LHS parts paired with it.
  void scores_and_dp(int tiles) {
    auto& r = w_.sregs();
    const int qp = r.take(), dp = r.take(), t = r.take();
    const int x = vregs_.take_run(2), y = x + 1;  // paired, [q | dout] is one MXU row
    for (int b = 0; b < parts_; ++b) {
      const std::vector<int> lhs = lhs_parts(b);
      if (lhs.empty()) continue;
      if (parts_ > 1) {
        load_key_weights(kScores, kt_, b, t);
        if (!paired_) load_key_weights(kDp, vt_, b, t);
      }
      w_.line("smuli s{}, s{}, {}", t, c0_, row_bytes_);
      w_.line("saddi s{}, s{}, {}", qp, t, q_);
      w_.line("saddi s{}, s{}, {}", dp, t, do_);
      for (int i = 0; i < tiles; ++i) {
        w_.line("{} v{}, m0, s{}, 0, {}", load_mnemonic(s_.dtype), x, qp, row_bytes_);
        w_.line("{} v{}, m0, s{}, 0, {}", load_mnemonic(s_.dtype), y, dp, row_bytes_);
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
        w_.line("saddi s{}, s{}, {}", qp, qp, kSublanes * row_bytes_);
        w_.line("saddi s{}, s{}, {}", dp, dp, kSublanes * row_bytes_);
      }
    }
    vregs_.release_run(x, 2);
    for (int v : {qp, dp, t}) r.release(v);
  }

  // (2b), several parts: dq's share ds @ k from the staged ds, per part of k.
  void dq_products(int tiles) {
    auto& r = w_.sregs();
    const int a = r.take(), t = r.take();
    const int x = vregs_.take_run(2);  // paired, [ds | 0]
    if (paired_) w_.line("vmov v{}, v{}", x + 1, c_.zero);
    for (int b = 0; b < parts_; ++b) {
      const std::vector<int> lhs = lhs_parts(b);
      if (lhs.empty()) continue;
      load_key_weights(kDq, kw_, b, t);
      w_.load_immediate(a, ds_stage_);
      for (int i = 0; i < tiles; ++i) {
        w_.line("vld v{}, m0, s{}, 0, {}", x, a, kRowOfVreg);
        int held = 0;
        for (int lp : lhs) {
          peel_bf16_parts(w_, vregs_, x, 1, held, lp);
          held = lp;
          w_.line("mxu.mm mxu{}, v{}, {}", kDq, x, i);
        }
        w_.line("saddi s{}, s{}, {}", a, a, kVregBytes);
      }
    }
    vregs_.release_run(x, 2);
    r.release(a);
    r.release(t);
  }

  // (2) per tile: p and ds, ds @ k into mxu2, p and ds staged for the transposes.
  void probabilities_and_ds(int tiles) {
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
      if (ragged_keys_) mask_keys_past(w_, c_, p, last_key, 0, c_.lane, th, t, 1);
      w_.line("vld v{}, m0, s{}, 0, {}", a, st, kRowOfVreg);
      w_.line("vsub v{}, v{}, v{}", p, p, a);
      w_.line("vexp v{}, v{}", p, p);  // p = exp(s - lse): 0 where masked
      if (!paired_) w_.line("mxu.pop v{}, mxu{}, {}", d, kDp, i);
      w_.line("vld v{}, m0, s{}, {}, {}", a, st, kVregBytes, kRowOfVreg);
      w_.line("vsub v{}, v{}, v{}", d, d, a);
      w_.line("vmul v{}, v{}, v{}", d, d, p);  // ds = p * (dp - delta)
      w_.line("vst v{}, m0, s{}, 0, {}", p, ps, kRowOfVreg);
      w_.line("vst v{}, m0, s{}, 0, {}", d, dss, kRowOfVreg);
      if (parts_ == 1) w_.line("mxu.mm mxu{}, v{}, {}", kDq, d, i);
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
  void transposed_products() {
    auto& r = w_.sregs();
    const int a = r.take(), t = r.take();
    const int block = vregs_.take_run(16, 16);
    // Paired, or peeling parts, a tile is pushed from a copy: zero, tile, zero.
    const bool copied = paired_ || parts_ > 1;
    const int lhs = copied ? vregs_.take_run(3) : -1;
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
      for (int b = 0; b < parts_; ++b) {
        const std::vector<int> parts = lhs_parts(b);
        if (parts.empty()) continue;
        if (!paired_ || k == 0 || parts_ > 1) {  // paired at one pass, the block diagonal serves both
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
          int held = 0;
          for (int lp : parts) {
            peel_bf16_parts(w_, vregs_, lhs + 1, 1, held, lp);
            held = lp;
            w_.line("mxu.mm mxu{}, v{}, {}", kTransposed, paired_ && k == 1 ? lhs : lhs + 1, slot);
          }
        }
      }
    }
    vregs_.release_run(block, 16);
    if (copied) vregs_.release_run(lhs, 3);
    r.release(a);
    r.release(t);
  }

  // (4) dq += (ds @ k) * scale, per tile.
  void accumulate_dq(int tiles) {
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
  void pop_key_gradients() {
    auto& r = w_.sregs();
    const int dv = r.take(), dk = r.take();
    const int x = vregs_.take_run(2);
    w_.line("smuli s{}, s{}, {}", dv, j_, kBlock * row_bytes_);
    w_.line("saddi s{}, s{}, {}", dk, dv, dk_out_);
    w_.line("saddi s{}, s{}, {}", dv, dv, dv_out_);
    for (int v = 0; v < kTiles; ++v) {
      w_.line("mxu.pop v{}, mxu{}, {}", x, kTransposed, v);
      w_.line("{} v{}, m0, s{}, 0, {}", store_mnemonic(s_.dtype), x, dv, row_bytes_);
      if (!paired_) w_.line("mxu.pop v{}, mxu{}, {}", x + 1, kTransposed, kTiles + v);
      w_.line("vmul v{}, v{}, v{}", x + 1, x + 1, c_.scale);
      w_.line("{} v{}, m0, s{}, 0, {}", store_mnemonic(s_.dtype), x + 1, dk, row_bytes_);
      w_.line("saddi s{}, s{}, {}", dv, dv, kSublanes * row_bytes_);
      w_.line("saddi s{}, s{}, {}", dk, dk, kSublanes * row_bytes_);
    }
    vregs_.release_run(x, 2);
    r.release(dv);
    r.release(dk);
  }

  // dq converted, then dq, dk and dv of this head back to HBM; waits for them.
  void write_back() {
    auto& r = w_.sregs();
    const int i = r.take(), n = r.take(), src = r.take(), dst = r.take();
    const std::string loop = w_.new_label("dq_out");
    w_.line("sli s{}, 0", i);
    w_.load_immediate(n, round_up(s_.q_len, kSublanes) / kSublanes);
    w_.load_immediate(src, dq_acc_);
    w_.load_immediate(dst, dq_out_);
    w_.place(loop);
    const int x = vregs_.take();
    w_.line("vld v{}, m0, s{}, 0, {}", x, src, kRowOfVreg);
    w_.line("{} v{}, m0, s{}, 0, {}", store_mnemonic(s_.dtype), x, dst, row_bytes_);
    vregs_.release(x);
    w_.line("saddi s{}, s{}, {}", src, src, kVregBytes);
    w_.line("saddi s{}, s{}, {}", dst, dst, kSublanes * row_bytes_);
    w_.line("saddi s{}, s{}, 1", i, i);
    w_.line("blt s{}, s{}, {}", i, n, loop);
    const int hbm = i, rows = n, rb = src, vs = dst, vm = r.take(), t = r.take();
    w_.load_immediate(rb, s_.head_dim * eb_);
    w_.load_immediate(vs, row_bytes_);
    const int64_t q_elems = s_.batch * s_.q_len * s_.head_dim, kv_elems = s_.batch * s_.kv_len * s_.head_dim;
    const struct {
      int64_t vmem, base_elems, len;
    } outs[] = {{dq_out_, 0, s_.q_len}, {dk_out_, q_elems, s_.kv_len}, {dv_out_, q_elems + kv_elems, s_.kv_len}};
    for (const auto& o : outs) {
      w_.line("sarg s{}, {}", hbm, grads_arg_);
      w_.line("saddi s{}, s{}, {}", hbm, hbm, o.base_elems * eb_);
      w_.line("smuli s{}, s{}, {}", t, bh_, o.len * s_.head_dim * eb_);
      w_.line("sadd s{}, s{}, s{}", hbm, hbm, t);
      w_.load_immediate(vm, o.vmem);
      w_.load_immediate(rows, o.len);
      w_.line("dma.v2h dq1, sem{}, s{}, s{}, s{}, s{}, s{}, s{}", kSemOutput, vm, hbm, rows, rb, vs, rb);
    }
    w_.line("sem.wait sem{}, 3", kSemOutput);  // the next head overwrites these buffers
    for (int v : {i, n, src, dst, vm, t}) r.release(v);
  }

  const AttentionSpec& s_;
  const sim::ChipConfig& chip_;
  AsmWriter w_;
  RegisterPool vregs_{"vector registers", 0, 31};
  int eb_ = 4;
  int64_t row_bytes_ = 0, s_pad_ = 0, t_pad_ = 0, key_blocks_ = 0, full_query_blocks_ = 0, last_rows_ = 0;
  bool ragged_keys_ = false;
  bool paired_ = false;                           // a 256-wide MXU holds two 128-wide weight blocks
  int parts_ = 1;                                 // bf16 parts of each weight (f32 at several passes)
  std::vector<std::pair<int, int>> pairs_;        // (LHS part, weight part) products per pass
  int64_t key_part_ = 0, query_part_ = 0;         // bytes between a weight's parts
  int64_t weight_row_ = 0, weight_block_ = 0;     // bytes of one MXU weight row, of D such rows
  int64_t q_ = 0, k_ = 0, v_ = 0, o_ = 0, do_ = 0, lse_ = 0, kt_ = 0, vt_ = 0, kw_ = 0, qw_ = 0, dow_ = 0, rows_ = 0;
  int64_t dq_acc_ = 0, p_stage_ = 0, ds_stage_ = 0, dq_out_ = 0, dk_out_ = 0, dv_out_ = 0;
  std::vector<int> args_;
  int lse_arg_ = 0, grads_arg_ = 0;
  int bh_ = -1, j_ = -1, c0_ = -1;
  AttentionConstants c_;
};

}  // namespace

std::string attention_backward_unsupported(const AttentionSpec& spec, const sim::ChipConfig& chip) {
  try {
    AttentionBackwardBuilder(spec, chip).check();
  } catch (const KernelError& e) {
    return e.what();
  }
  return "";
}

isa::Program make_attention_backward(const AttentionSpec& spec, const sim::ChipConfig& chip) {
  return AttentionBackwardBuilder(spec, chip).build();
}

}  // namespace vtpu::kernels
