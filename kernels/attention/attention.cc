// The fused attention forward's entry points and its head loop: inputs fetched a head ahead,
// k and v turned into MXU weights once per head (the schedule is in attention_builder.h).
#include "kernels/attention/attention.h"

#include <fmt/format.h>

#include "kernels/codegen/core_share.h"
#include "kernels/codegen/vmem_layout.h"

#include "kernels/attention/attention_builder.h"

namespace vtpu::kernels {
namespace attention_detail {

isa::Program AttentionBuilder::build() {
  validate();
  plan();
  emit();
  w_.target_mxu(chip_.mxu_dim);
  w_.split_across_cores();
  return w_.assemble();
}

// What build() checks before it emits anything: the shape and that a head fits VMEM.
void AttentionBuilder::check() {
  validate();
  plan();
}

void AttentionBuilder::validate() const {
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

void AttentionBuilder::plan() {
  d_ = chip_.mxu_dim;
  g_ = AttentionGeometry(s_, kSublanes, d_);
  group_ = d_ / kLanes;
  head_lane_blocks_ = (s_.head_dim + kLanes - 1) / kLanes;
  chunk_tiles_ = std::min(32, chip_.mxu_acc_slots / 2);
  const int64_t chunk_rows = int64_t(chunk_tiles_) * kSublanes;
  full_chunks_ = s_.q_len / chunk_rows;
  last_rows_ = s_.q_len % chunk_rows;
  chunks_ = full_chunks_ + (last_rows_ > 0);
  pipelined_ = g_.parts == 1 && chip_.mxu_per_core >= 2;
  mxu_scores_ = 0;
  mxu_values_ = chip_.mxu_per_core > 1 ? 1 : 0;
  record_bytes_ = (3 + group_ * (g_.parts > 1 ? 2 : 1)) * kVregBytes;

  kt_part_bytes_ = g_.key_blocks * d_ * d_ * 2;
  vp_part_bytes_ = g_.kv_pad * d_ * 2;
  // Two head buffers let the next head's inputs arrive while this one computes. A long head
  // whose two buffers do not fit VMEM (8,192 tokens on v7) takes one: its successor's k and v
  // are fetched once this head's have become weights, its q after the last chunk.
  for (buffers_ = 2;; --buffers_) {
    VmemLayout vmem_layout;
    // One head's buffer; the second is the same layout head_bytes_ further on.
    q_off_ = vmem_layout.place(g_.q_pad * g_.row_bytes);
    k_off_ = vmem_layout.place(g_.kv_pad * g_.row_bytes);
    v_off_ = vmem_layout.place(g_.kv_pad * g_.row_bytes);
    o_off_ = vmem_layout.place(g_.q_pad * g_.row_bytes);
    if (s_.write_lse) l_off_ = vmem_layout.place(g_.q_pad * kRowOfVreg);
    head_bytes_ = int64_t(vmem_layout.end());
    vmem_layout.repeat(buffers_);
    kt_vmem_ = vmem_layout.place(g_.stored_parts * kt_part_bytes_);
    vp_vmem_ = vmem_layout.place(g_.stored_parts * vp_part_bytes_);
    state_vmem_ = vmem_layout.place(chunk_tiles_ * record_bytes_);
    if (vmem_layout.end() <= chip_.kernel_vmem_bytes()) break;
    if (buffers_ == 1) {
      throw KernelError(fmt::format("attention: a head of {} queries and {} keys needs {} bytes of VMEM, {} has {}", s_.q_len,
                                    s_.kv_len, vmem_layout.end(), chip_.name, chip_.kernel_vmem_bytes()));
    }
  }
  q_arg_ = w_.argument("q", isa::ArgumentKind::Buffer);
  k_arg_ = w_.argument("k", isa::ArgumentKind::Buffer);
  v_arg_ = w_.argument("v", isa::ArgumentKind::Buffer);
  out_arg_ = w_.argument("out", isa::ArgumentKind::Buffer);
}

void AttentionBuilder::emit() {
  auto& r = w_.sregs();
  bh_ = r.take();
  hb_ = r.take();
  heads_ = r.take();
  const int t = r.take();
  // Heads are independent: each TensorCore takes a contiguous share of them.
  w_.load_immediate(heads_, s_.batch);
  emit_core_share_or_halt(w_, bh_, heads_);
  w_.line("sli s{}, 0", hb_);
  issue_inputs(bh_, hb_, kAllInputs);
  signal_outputs(buffers_ * dmas_per_head());  // the heads "before" the first have nothing in flight
  c_ = emit_attention_constants(w_, vregs_, s_, g_.ragged_keys, t);
  const std::string head_loop = w_.new_label("head");
  w_.place(head_loop);
  w_.line("sem.wait sem{}, 3", kSemInput);
  if (buffers_ == 2) fetch_next_head(t, kAllInputs);
  wait_outputs(dmas_per_head());  // this buffer's writes from `buffers_` heads ago
  build_key_weights();
  build_value_weights();
  if (buffers_ == 1) fetch_next_head(t, kKeysAndValues);
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
  if (buffers_ == 1) fetch_next_head(t, kQueries);
  w_.line("saddi s{}, s{}, 1", bh_, bh_);
  if (buffers_ == 2) {
    w_.load_immediate(t, head_bytes_);
    w_.line("ssub s{}, s{}, s{}", hb_, t, hb_);
  }
  w_.line("blt s{}, s{}, {}", bh_, heads_, head_loop);
  for (int x : {bh_, hb_, t, heads_}) r.release(x);
}

void AttentionBuilder::signal_outputs(int64_t n) {
  for (; n > 0; n -= 255) w_.line("sem.signal sem{}, {}", kSemOutput, std::min<int64_t>(n, 255));
}

void AttentionBuilder::wait_outputs(int64_t n) {
  for (; n > 0; n -= 255) w_.line("sem.wait sem{}, {}", kSemOutput, std::min<int64_t>(n, 255));
}

// The next head's `inputs`, when there is a next head: into the other buffer with two buffers,
// into this one with one. `t` is scratch.
void AttentionBuilder::fetch_next_head(int t, int inputs) {
  auto& r = w_.sregs();
  const std::string last = w_.new_label("last_head");
  w_.line("saddi s{}, s{}, 1", t, bh_);
  w_.line("bge s{}, s{}, {}", t, heads_, last);
  if (buffers_ == 2) {
    const int other = r.take();
    w_.load_immediate(other, head_bytes_);
    w_.line("ssub s{}, s{}, s{}", other, other, hb_);
    issue_inputs(t, other, inputs);
    r.release(other);
  } else {
    issue_inputs(t, hb_, inputs);
  }
  w_.place(last);
}

// `inputs` (kQueries, kKeysAndValues or both) of head s`head` into the head buffer at s`buffer`.
void AttentionBuilder::issue_inputs(int head, int buffer, int inputs) {
  auto& r = w_.sregs();
  const int hbm = r.take(), vm = r.take(), rows = r.take(), rb = r.take(), vs = r.take(), t = r.take();
  w_.load_immediate(rb, s_.head_dim * g_.element_bytes);
  w_.load_immediate(vs, g_.row_bytes);
  const std::pair<int, int64_t> q{q_arg_, q_off_}, k{k_arg_, k_off_}, v{v_arg_, v_off_};
  for (auto [arg, off] : {q, k, v}) {
    if (!(inputs & (arg == q_arg_ ? kQueries : kKeysAndValues))) continue;
    const int64_t len = arg == q_arg_ ? s_.q_len : s_.kv_len;
    w_.line("sarg s{}, {}", hbm, arg);
    w_.line("smuli s{}, s{}, {}", t, head, len * s_.head_dim * g_.element_bytes);
    w_.line("sadd s{}, s{}, s{}", hbm, hbm, t);
    w_.line("saddi s{}, s{}, {}", vm, buffer, off);
    w_.load_immediate(rows, len);
    w_.dma_to_vmem(0, kSemInput, {.vmem = vm, .hbm = hbm, .rows = rows, .row_bytes = rb, .vmem_stride = vs, .hbm_stride = rb});
  }
  for (int x : {hbm, vm, rows, rb, vs, t}) r.release(x);
}

// Writes vreg `x` as weights (its stored parts) to VMEM at s`addr` (+ part_stride per part), rows
// `stride` apart (bf16_parts.h).
void AttentionBuilder::store_parts(int x, int addr, int64_t part_stride, int64_t stride) {
  store_weight_parts(w_, vregs_, finite_mask_, x, addr, 0, g_.parts, g_.finite_passes, c_.zero, part_stride, stride);
}

// k^T weights: key block j's part p is a D x D block (row = head dim, column = key) at
// kt_vmem_ + p * kt_part_bytes_ + j * D * D * 2.
void AttentionBuilder::build_key_weights() {
  auto& r = w_.sregs();
  const int j = r.take(), n = r.take(), src = r.take(), dst = r.take(), a = r.take(), o = r.take();
  const std::string loop = w_.new_label("key_weights");
  w_.line("sli s{}, 0", j);
  w_.load_immediate(n, g_.key_blocks);
  w_.line("saddi s{}, s{}, {}", src, hb_, k_off_);
  w_.load_immediate(dst, kt_vmem_);
  w_.place(loop);
  const int block = vregs_.take_run(16);
  for (int kb = 0; kb < group_; ++kb) {
    for (int hd = 0; hd < head_lane_blocks_; ++hd) {
      w_.line("saddi s{}, s{}, {}", a, src, kb * kLanes * g_.row_bytes + hd * kLanes * g_.element_bytes);
      for (int v = 0; v < 16; ++v) {
        w_.line("{} v{}, m0, s{}, 0, {}", load_mnemonic(s_.dtype), block + v, a, g_.row_bytes);
        w_.line("saddi s{}, s{}, {}", a, a, kSublanes * g_.row_bytes);
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
  w_.line("saddi s{}, s{}, {}", src, src, d_ * g_.row_bytes);
  w_.line("saddi s{}, s{}, {}", dst, dst, int64_t(d_) * d_ * 2);
  w_.line("saddi s{}, s{}, 1", j, j);
  w_.line("blt s{}, s{}, {}", j, n, loop);
  for (int x : {j, n, src, dst, a, o}) r.release(x);
}

// v weights: part p of key row t at vp_vmem_ + p * vp_part_bytes_ + t * D * 2 (key block j's
// weights are rows j*D .. j*D + D - 1). Rows past kv_len stay zero.
void AttentionBuilder::build_value_weights() {
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
    w_.line("{} v{}, m0, s{}, {}, {}", load_mnemonic(s_.dtype), x, src, hd * kLanes * g_.element_bytes, g_.row_bytes);
    w_.line("saddi s{}, s{}, {}", o, dst, hd * kLanes * 2);
    store_parts(x, o, vp_part_bytes_, d_ * 2);
  }
  vregs_.release(x);
  w_.line("saddi s{}, s{}, {}", src, src, kSublanes * g_.row_bytes);
  w_.line("saddi s{}, s{}, {}", dst, dst, kSublanes * d_ * 2);
  w_.line("saddi s{}, s{}, 1", i, i);
  w_.line("blt s{}, s{}, {}", i, n, loop);
  for (int x2 : {i, n, src, dst, o}) r.release(x2);
}

}  // namespace attention_detail

isa::Program make_attention(const AttentionSpec& spec, const sim::ChipConfig& chip) {
  return attention_detail::AttentionBuilder(spec, chip).build();
}

std::string attention_unsupported(const AttentionSpec& spec, const sim::ChipConfig& chip) {
  try {
    attention_detail::AttentionBuilder(spec, chip).check();
  } catch (const KernelError& e) {
    return e.what();
  }
  return "";
}

}  // namespace vtpu::kernels
