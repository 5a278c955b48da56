// The fused attention backward's entry points, per-head loads, weights and write-backs (the
// schedule is in attention_backward_builder.h).
#include "kernels/attention/attention_backward.h"

#include <fmt/format.h>

#include "kernels/codegen/core_share.h"
#include "kernels/codegen/vmem_layout.h"

#include "kernels/attention/attention_backward_builder.h"

namespace vtpu::kernels {
namespace attention_backward_detail {

void AttentionBackwardBuilder::check() {
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

isa::Program AttentionBackwardBuilder::build() {
  check();
  emit();
  w_.target_mxu(chip_.mxu_dim);
  w_.split_across_cores();
  return w_.assemble();
}

void AttentionBackwardBuilder::plan() {
  g_ = AttentionGeometry(s_, kBlock, kBlock);
  paired_ = chip_.mxu_dim == 2 * kBlock;
  weight_row_ = chip_.mxu_dim * 2;
  weight_block_ = chip_.mxu_dim * weight_row_;
  full_query_blocks_ = s_.q_len / kBlock;
  last_rows_ = s_.q_len % kBlock;
  // The gradients get VMEM of their own. A long head that does not fit so writes dq over `out`
  // and dk, dv over k and v, dead by then (out is read for delta, k and v become weights first),
  // but only where nothing is padded (head_dim 128, lengths whole blocks): the next head's
  // inputs then overwrite every byte of those buffers, so no stale gradient reaches padding the
  // kernel reads as zeros.
  const bool unpadded = s_.head_dim == kBlock && s_.q_len % kBlock == 0 && s_.kv_len % kBlock == 0;
  for (bool reuse : {false, true}) {
    const uint64_t end = place_buffers(reuse);
    if (end <= chip_.kernel_vmem_bytes()) return;
    if (reuse || !unpadded) {
      throw KernelError(fmt::format("attention backward: a head of {} queries and {} keys needs {} bytes of VMEM, {} has {}",
                                    s_.q_len, s_.kv_len, end, chip_.name, chip_.kernel_vmem_bytes()));
    }
  }
}

uint64_t AttentionBackwardBuilder::place_buffers(bool reuse_inputs_for_gradients) {
  VmemLayout vmem_layout;
  q_ = vmem_layout.place(g_.q_pad * g_.row_bytes);
  k_ = vmem_layout.place(g_.kv_pad * g_.row_bytes);
  v_ = vmem_layout.place(g_.kv_pad * g_.row_bytes);
  o_ = vmem_layout.place(g_.q_pad * g_.row_bytes);
  do_ = vmem_layout.place(g_.q_pad * g_.row_bytes);
  lse_ = vmem_layout.place(g_.q_pad * 4 + kRowOfVreg + 64);  // a vld at stride 4 reads 512 bytes past its row
  // Weights: one MXU-sized block per key block (k^T, v^T, k rows) or query block (q and dout
  // rows); paired, v^T and q sit in the bottom-right quadrant of k^T's and dout's blocks.
  const int64_t diagonal = kBlock * weight_row_ + kBlock * 2;
  // Part b of each weight at b * key_part_ (per key block) or b * query_part_ (per query block).
  key_part_ = g_.key_blocks * weight_block_;
  query_part_ = g_.q_pad / kBlock * weight_block_;
  kt_ = vmem_layout.place(g_.stored_parts * key_part_);
  vt_ = paired_ ? kt_ + diagonal : vmem_layout.place(g_.stored_parts * key_part_);
  kw_ = vmem_layout.place(g_.stored_parts * key_part_);
  dow_ = vmem_layout.place(g_.stored_parts * query_part_);
  qw_ = paired_ ? dow_ + diagonal : vmem_layout.place(g_.stored_parts * query_part_);
  rows_ = vmem_layout.place(g_.q_pad / kSublanes * 2 * kVregBytes);  // per tile: lse broadcast, delta
  dq_acc_ = vmem_layout.place(g_.q_pad * kRowOfVreg);
  p_stage_ = vmem_layout.place(kBlock * kRowOfVreg);
  ds_stage_ = vmem_layout.place(kBlock * kRowOfVreg);
  if (reuse_inputs_for_gradients) {
    dq_out_ = o_;
    dk_out_ = k_;
    dv_out_ = v_;
  } else {
    dq_out_ = vmem_layout.place(g_.q_pad * g_.row_bytes);
    dk_out_ = vmem_layout.place(g_.kv_pad * g_.row_bytes);
    dv_out_ = vmem_layout.place(g_.kv_pad * g_.row_bytes);
  }
  return vmem_layout.end();
}

void AttentionBackwardBuilder::emit() {
  for (const char* name : {"q", "k", "v", "out", "dout"}) args_.push_back(w_.argument(name, isa::ArgumentKind::Buffer));
  lse_arg_ = w_.argument("lse", isa::ArgumentKind::Buffer);
  grads_arg_ = w_.argument("grads", isa::ArgumentKind::Buffer);
  auto& r = w_.sregs();
  bh_ = r.take();
  const int heads = r.take(), t = r.take();
  c_ = emit_attention_constants(w_, vregs_, s_, g_.ragged_keys, t);
  w_.load_immediate(heads, s_.batch);
  emit_core_share_or_halt(w_, bh_, heads);  // heads are independent: a contiguous share per TensorCore
  const std::string head_loop = w_.new_label("head");
  w_.place(head_loop);
  load_head();
  transposed_weights(k_, kt_);
  transposed_weights(v_, vt_);
  row_weights(k_, kw_, g_.kv_pad, key_part_);
  row_weights(q_, qw_, g_.q_pad, query_part_);
  row_weights(do_, dow_, g_.q_pad, query_part_);
  row_state();
  clear_dq();
  key_blocks();
  write_back();
  w_.line("saddi s{}, s{}, 1", bh_, bh_);
  w_.line("blt s{}, s{}, {}", bh_, heads, head_loop);
  for (int x : {bh_, heads, t}) r.release(x);
}

// The head's six inputs into VMEM; waits for them (the previous head's write-backs have landed).
void AttentionBackwardBuilder::load_head() {
  auto& r = w_.sregs();
  const int hbm = r.take(), vm = r.take(), rows = r.take(), rb = r.take(), vs = r.take(), t = r.take();
  w_.load_immediate(rb, s_.head_dim * g_.element_bytes);
  w_.load_immediate(vs, g_.row_bytes);
  const int64_t at[] = {q_, k_, v_, o_, do_};
  const int64_t lens[] = {s_.q_len, s_.kv_len, s_.kv_len, s_.q_len, s_.q_len};
  for (int i = 0; i < 5; ++i) {
    w_.line("sarg s{}, {}", hbm, args_[i]);
    w_.line("smuli s{}, s{}, {}", t, bh_, lens[i] * s_.head_dim * g_.element_bytes);
    w_.line("sadd s{}, s{}, s{}", hbm, hbm, t);
    w_.load_immediate(vm, at[i]);
    w_.load_immediate(rows, lens[i]);
    w_.dma_to_vmem(0, kSemInput, {.vmem = vm, .hbm = hbm, .rows = rows, .row_bytes = rb, .vmem_stride = vs, .hbm_stride = rb});
  }
  w_.line("sarg s{}, {}", hbm, lse_arg_);
  w_.line("smuli s{}, s{}, {}", t, bh_, s_.q_len * 4);
  w_.line("sadd s{}, s{}, s{}", hbm, hbm, t);
  w_.load_immediate(vm, lse_);
  w_.line("sli s{}, 1", rows);
  w_.load_immediate(rb, s_.q_len * 4);
  w_.dma_to_vmem(0, kSemInput, {.vmem = vm, .hbm = hbm, .rows = rows, .row_bytes = rb, .vmem_stride = rb, .hbm_stride = rb});
  w_.line("sem.wait sem{}, 6", kSemInput);
  for (int x : {hbm, vm, rows, rb, vs, t}) r.release(x);
}

// Per key block: the 128 x 128 block of rows j*128.. of `src` transposed into bf16 weights.
void AttentionBackwardBuilder::transposed_weights(int64_t src_at, int64_t dst_at) {
  auto& r = w_.sregs();
  const int j = r.take(), n = r.take(), src = r.take(), dst = r.take(), a = r.take();
  const std::string loop = w_.new_label("transposed_weights");
  w_.line("sli s{}, 0", j);
  w_.load_immediate(n, g_.key_blocks);
  w_.load_immediate(src, src_at);
  w_.load_immediate(dst, dst_at);
  w_.place(loop);
  const int block = vregs_.take_run(16, 16);
  w_.line("smov s{}, s{}", a, src);
  for (int v = 0; v < 16; ++v) {
    w_.line("{} v{}, m0, s{}, 0, {}", load_mnemonic(s_.dtype), block + v, a, g_.row_bytes);
    w_.line("saddi s{}, s{}, {}", a, a, kSublanes * g_.row_bytes);
  }
  w_.line("vtrans v{}, v{}", block, block);
  w_.line("smov s{}, s{}", a, dst);
  for (int v = 0; v < 16; ++v) {
    store_parts(block + v, a, key_part_);
    w_.line("saddi s{}, s{}, {}", a, a, kSublanes * weight_row_);
  }
  vregs_.release_run(block, 16);
  w_.line("saddi s{}, s{}, {}", src, src, kBlock * g_.row_bytes);
  w_.line("saddi s{}, s{}, {}", dst, dst, weight_block_);
  w_.line("saddi s{}, s{}, 1", j, j);
  w_.line("blt s{}, s{}, {}", j, n, loop);
  for (int x : {j, n, src, dst, a}) r.release(x);
}

// Vreg `x` as bf16 weight rows at s`addr`, its stored parts `part_stride` apart (bf16_parts.h).
void AttentionBackwardBuilder::store_parts(int x, int addr, int64_t part_stride) {
  store_weight_parts(w_, vregs_, finite_mask_, x, addr, 0, g_.parts, g_.finite_passes, c_.zero, part_stride, weight_row_);
}

std::vector<int> AttentionBackwardBuilder::lhs_parts(int b) const { return lhs_parts_against(g_.pairs, b, g_.finite_passes); }

// The `rows` rows of `src` (a multiple of 128: padding rows are zero) as bf16 weight rows, 128
// rows to a weight block; its parts `part_stride` apart.
void AttentionBackwardBuilder::row_weights(int64_t src_at, int64_t dst_at, int64_t rows, int64_t part_stride) {
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
    w_.line("{} v{}, m0, s{}, 0, {}", load_mnemonic(s_.dtype), x, src, g_.row_bytes);
    store_parts(x, a, part_stride);
    w_.line("saddi s{}, s{}, {}", src, src, kSublanes * g_.row_bytes);
    w_.line("saddi s{}, s{}, {}", a, a, kSublanes * weight_row_);
  }
  vregs_.release(x);
  w_.line("saddi s{}, s{}, {}", dst, dst, weight_block_);
  w_.line("saddi s{}, s{}, 1", i, i);
  w_.line("blt s{}, s{}, {}", i, n, loop);
  for (int x2 : {i, n, src, dst, a}) r.release(x2);
}

// Per query tile: lse broadcast along each row, and delta = rowsum(dout * out).
void AttentionBackwardBuilder::row_state() {
  auto& r = w_.sregs();
  const int i = r.take(), n = r.take(), o = r.take(), d = r.take(), l = r.take(), st = r.take();
  const std::string loop = w_.new_label("row_state");
  w_.line("sli s{}, 0", i);
  w_.load_immediate(n, g_.q_pad / kSublanes);
  w_.load_immediate(o, o_);
  w_.load_immediate(d, do_);
  w_.load_immediate(l, lse_);
  w_.load_immediate(st, rows_);
  w_.place(loop);
  const int x = vregs_.take(), y = vregs_.take();
  w_.line("vld v{}, m0, s{}, 0, 4", x, l);  // sublane s: lse[s], lse[s + 1], ...
  w_.line("vbcast.lane v{}, v{}, 0", x, x);
  w_.line("vst v{}, m0, s{}, 0, {}", x, st, kRowOfVreg);
  w_.line("{} v{}, m0, s{}, 0, {}", load_mnemonic(s_.dtype), x, o, g_.row_bytes);
  w_.line("{} v{}, m0, s{}, 0, {}", load_mnemonic(s_.dtype), y, d, g_.row_bytes);
  w_.line("vmul v{}, v{}, v{}", x, x, y);
  w_.line("vredsum.lane v{}, v{}", x, x);
  w_.line("vst v{}, m0, s{}, {}, {}", x, st, kVregBytes, kRowOfVreg);
  vregs_.release(x);
  vregs_.release(y);
  w_.line("saddi s{}, s{}, {}", l, l, kSublanes * 4);
  w_.line("saddi s{}, s{}, {}", o, o, kSublanes * g_.row_bytes);
  w_.line("saddi s{}, s{}, {}", d, d, kSublanes * g_.row_bytes);
  w_.line("saddi s{}, s{}, {}", st, st, 2 * kVregBytes);
  w_.line("saddi s{}, s{}, 1", i, i);
  w_.line("blt s{}, s{}, {}", i, n, loop);
  for (int x2 : {i, n, o, d, l, st}) r.release(x2);
}

void AttentionBackwardBuilder::clear_dq() {
  auto& r = w_.sregs();
  const int i = r.take(), n = r.take(), a = r.take();
  const std::string loop = w_.new_label("clear_dq");
  w_.line("sli s{}, 0", i);
  w_.load_immediate(n, g_.q_pad / kSublanes);
  w_.load_immediate(a, dq_acc_);
  w_.place(loop);
  w_.line("vst v{}, m0, s{}, 0, {}", c_.zero, a, kRowOfVreg);
  w_.line("saddi s{}, s{}, {}", a, a, kVregBytes);
  w_.line("saddi s{}, s{}, 1", i, i);
  w_.line("blt s{}, s{}, {}", i, n, loop);
  for (int x : {i, n, a}) r.release(x);
}

// dq converted, then dq, dk and dv of this head back to HBM; waits for them.
void AttentionBackwardBuilder::write_back() {
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
  w_.line("{} v{}, m0, s{}, 0, {}", store_mnemonic(s_.dtype), x, dst, g_.row_bytes);
  vregs_.release(x);
  w_.line("saddi s{}, s{}, {}", src, src, kVregBytes);
  w_.line("saddi s{}, s{}, {}", dst, dst, kSublanes * g_.row_bytes);
  w_.line("saddi s{}, s{}, 1", i, i);
  w_.line("blt s{}, s{}, {}", i, n, loop);
  const int hbm = i, rows = n, rb = src, vs = dst, vm = r.take(), t = r.take();
  w_.load_immediate(rb, s_.head_dim * g_.element_bytes);
  w_.load_immediate(vs, g_.row_bytes);
  const int64_t q_elems = s_.batch * s_.q_len * s_.head_dim, kv_elems = s_.batch * s_.kv_len * s_.head_dim;
  const struct {
    int64_t vmem, base_elems, len;
  } outs[] = {{dq_out_, 0, s_.q_len}, {dk_out_, q_elems, s_.kv_len}, {dv_out_, q_elems + kv_elems, s_.kv_len}};
  for (const auto& o : outs) {
    w_.line("sarg s{}, {}", hbm, grads_arg_);
    w_.line("saddi s{}, s{}, {}", hbm, hbm, o.base_elems * g_.element_bytes);
    w_.line("smuli s{}, s{}, {}", t, bh_, o.len * s_.head_dim * g_.element_bytes);
    w_.line("sadd s{}, s{}, s{}", hbm, hbm, t);
    w_.load_immediate(vm, o.vmem);
    w_.load_immediate(rows, o.len);
    w_.dma_to_hbm(1, kSemOutput, {.vmem = vm, .hbm = hbm, .rows = rows, .row_bytes = rb, .vmem_stride = vs, .hbm_stride = rb});
  }
  w_.line("sem.wait sem{}, 3", kSemOutput);  // the next head overwrites these buffers
  for (int v : {i, n, src, dst, vm, t}) r.release(v);
}

}  // namespace attention_backward_detail

std::string attention_backward_unsupported(const AttentionSpec& spec, const sim::ChipConfig& chip) {
  try {
    attention_backward_detail::AttentionBackwardBuilder(spec, chip).check();
  } catch (const KernelError& e) {
    return e.what();
  }
  return "";
}

isa::Program make_attention_backward(const AttentionSpec& spec, const sim::ChipConfig& chip) {
  return attention_backward_detail::AttentionBackwardBuilder(spec, chip).build();
}

}  // namespace vtpu::kernels
