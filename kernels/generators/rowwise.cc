// The row kernels' entry points, block and chunk loops, prologue and scratch row (the schedule is
// in rowwise_builder.h).
#include "kernels/generators/rowwise.h"

#include <fmt/format.h>

#include <bit>
#include <vector>

#include "kernels/generators/rowwise_builder.h"

namespace vtpu::kernels {
namespace rowwise_detail {

isa::Program RowwiseBuilder::build() {
  validate();
  std::vector<StreamOperand> operands;
  for (const auto& in : spec_.inputs) operands.push_back({in.dtype, in.layout, false, in.strided});
  if (spec_.has_weight) weight_ = add(operands, {spec_.weight_dtype, Layout::Row, false});
  if (spec_.has_bias) bias_ = add(operands, {spec_.weight_dtype, Layout::Row, false});
  out_ = add(operands, {spec_.out_dtype, row_op_reduces(spec_.op) ? Layout::Column : Layout::Full, true});
  const int64_t cols_pad = (spec_.cols + kLanes - 1) / kLanes * kLanes;
  stream_.emplace(w_, chip_, spec_.rows, spec_.cols, operands, kMaxRowCols, kBlockBudgetBytes, needs_scratch() ? cols_pad * 4 : 0);
  prepare_masks();
  stream_->emit(vregs_, [&](int set, const BlockExtent& e) { block(set, e); });
  return w_.assemble();
}

int RowwiseBuilder::add(std::vector<StreamOperand>& v, StreamOperand o) {
  v.push_back(o);
  return static_cast<int>(v.size()) - 1;
}

void RowwiseBuilder::validate() {
  if (spec_.cols > kMaxRowCols) throw KernelError(fmt::format("row {}: rows of {} elements exceed {}", row_op_name(spec_.op), spec_.cols, kMaxRowCols));
  if (spec_.inputs.empty()) throw KernelError("row kernel without inputs");
  if (spec_.prologue && spec_.prologue->outputs().size() != 1) throw KernelError("a row kernel's prologue has one output");
  const bool norm = spec_.op == RowOp::LayerNorm || spec_.op == RowOp::RmsNorm;
  if ((spec_.has_weight || spec_.has_bias) && !norm) throw KernelError("weight and bias belong to layer_norm / rms_norm");
  if (spec_.has_bias && spec_.op != RowOp::LayerNorm) throw KernelError("rms_norm has no bias");
  if (!dtype_is_float(spec_.out_dtype)) throw KernelError("row kernels write f32, bf16 or f16");
  if (spec_.whole_chunks && spec_.cols % kLanes != 0) throw KernelError("row kernel: whole chunks need a multiple of 128 columns");
  if (spec_.correction < 0) throw KernelError("var: negative correction");
}

// m_lane0: lane 0 of every sublane (per-row results are stored from there); v_lane: the lane
// index of each element, for masking ragged chunks.
void RowwiseBuilder::prepare_masks() {
  auto& s = w_.sregs();
  lane_ = vregs_.take();
  lane0_ = masks_.take();
  tail_ = masks_.take();
  const int t = s.take(), v = vregs_.take();
  w_.line("viota v{}", lane_);
  w_.load_immediate(t, kLanes - 1);
  w_.line("vbcast v{}, s{}", v, t);
  w_.line("vand v{}, v{}, v{}", lane_, lane_, v);
  w_.load_immediate(t, 1);
  w_.line("vbcast v{}, s{}", v, t);
  w_.line("vicmp.lt m{}, v{}, v{}", lane0_, lane_, v);
  if (hoist_tail_masks_ && !spec_.whole_chunks) {
    // The last iteration starts at the row's length rounded down to whole iterations; its chunk
    // u keeps the lanes below (length mod the iteration's lanes) - 128 u.
    const int64_t lanes = chunk_unroll() * kLanes;
    const int rest = s.take();
    w_.line("sarg s{}, {}", t, stream_->cols_arg());
    w_.line("sshri s{}, s{}, {}", rest, t, std::countr_zero(uint64_t(lanes)));
    w_.line("sshli s{}, s{}, {}", rest, rest, std::countr_zero(uint64_t(lanes)));
    w_.line("ssub s{}, s{}, s{}", rest, t, rest);
    for (int64_t u = 0; u < chunk_unroll(); ++u) {
      tail_masks_.push_back(masks_.take());
      w_.line("saddi s{}, s{}, {}", t, rest, -u * kLanes);
      w_.line("vbcast v{}, s{}", v, t);
      w_.line("vicmp.lt m{}, v{}, v{}", tail_masks_.back(), lane_, v);
    }
    s.release(rest);
  }
  vregs_.release(v);
  s.release(t);
}

// Replaces lanes at or past the row's end in `x` by `identity` (only the last chunks are ragged:
// the loop's last iteration may run past the row's end).
void RowwiseBuilder::mask_tail(int x, const Cursors& c) {
  if (!c.masked) return;
  if (c.identity < 0) throw KernelError("row kernel: a pass masks its tail without an identity (chunk_loop's)");
  if (!tail_masks_.empty()) {
    w_.line("vsel v{}, m{}, v{}, v{}", x, tail_masks_.at(c.tile), x, c.identity);
    return;
  }
  const int v = vregs_.take(), t = w_.sregs().take();
  if (c.tile == 0) {
    w_.line("vbcast v{}, s{}", v, c.remaining);
  } else {
    w_.line("saddi s{}, s{}, {}", t, c.remaining, -c.tile * kLanes);
    w_.line("vbcast v{}, s{}", v, t);
  }
  w_.line("vicmp.lt m{}, v{}, v{}", tail_, lane_, v);
  w_.line("vsel v{}, m{}, v{}, v{}", x, tail_, x, c.identity);
  vregs_.release(v);
  w_.sregs().release(t);
}

void RowwiseBuilder::chunk_loop(const std::function<void(const Cursors&)>& body, std::optional<float> tail_identity) {
  auto& s = w_.sregs();
  Cursors c;
  // The identity is broadcast once per loop, not per chunk: the scalar unit is what bounds a
  // row kernel's chunk rate.
  if (tail_identity && !spec_.whole_chunks) c.identity = constant(*tail_identity);
  c.stream = &*stream_;
  c.operand.assign(stream_->operand_count(), -1);
  for (size_t i = 0; i < stream_->operand_count(); ++i) {
    const Layout l = stream_->operand(i).layout;
    if (is_rowwise_stored(l) || l == Layout::Row) {
      c.operand[i] = s.take();
      w_.line("smov s{}, s{}", c.operand[i], rowbase_[i]);
    }
  }
  if (needs_scratch()) {  // sums, maxima and products keep no scratch row: no cursor to step
    c.scratch = s.take();
    w_.line("smov s{}, s{}", c.scratch, scratch_base_);
  }
  c.remaining = s.take();
  w_.line("sarg s{}, {}", c.remaining, stream_->cols_arg());
  const int k = s.take(), n = s.take();
  const int64_t unroll = chunk_unroll();
  const auto advance = [&] {
    for (size_t i = 0; i < c.operand.size(); ++i) {
      if (c.operand[i] >= 0) w_.line("saddi s{}, s{}, {}", c.operand[i], c.operand[i], unroll * kLanes * stream_->element_bytes(i));
    }
    if (c.scratch >= 0) w_.line("saddi s{}, s{}, {}", c.scratch, c.scratch, unroll * kLanes * 4);
    w_.line("saddi s{}, s{}, {}", c.remaining, c.remaining, -unroll * kLanes);
  };
  // Whole iterations run unmasked; the row's end, when it is not one, takes one more masked
  // iteration (masking every chunk would chain a compare and a select into each accumulation).
  const std::string loop = w_.new_label("chunk"), tail = w_.new_label("chunk_tail"), done = w_.new_label("chunks_done");
  const bool masks = !spec_.whole_chunks;
  w_.line("sli s{}, 0", k);
  w_.line("sshri s{}, s{}, {}", n, c.remaining, std::countr_zero(uint64_t(unroll * kLanes)));
  w_.line("beq s{}, s0, {}", n, tail);
  w_.place(loop);
  c.masked = false;
  for (c.tile = 0; c.tile < unroll; ++c.tile) body(c);
  advance();
  w_.line("saddi s{}, s{}, 1", k, k);
  w_.line("blt s{}, s{}, {}", k, n, loop);
  w_.place(tail);
  if (masks) {  // the programs that mask serve rows of any length up to their columns
    w_.line("bge s0, s{}, {}", c.remaining, done);
    c.masked = true;
    for (c.tile = 0; c.tile < unroll; ++c.tile) body(c);
  }
  w_.place(done);
  for (int r : c.operand) {
    if (r >= 0) s.release(r);
  }
  for (int r : {c.remaining, k, n}) s.release(r);
  if (c.scratch >= 0) s.release(c.scratch);
  if (c.identity >= 0) vregs_.release(c.identity);
}

// The prologue's value for the chunk at `c`, in a fresh vreg (f32).
int RowwiseBuilder::prologue_value(const Cursors& c) {
  Expr identity;
  identity.add_output(identity.input(0, register_type(spec_.inputs[0].dtype)));
  const Expr& expr = spec_.prologue ? *spec_.prologue : identity;
  TileCodegen codegen(w_, vregs_, masks_, scratch_sreg_);
  std::vector<std::pair<int, TileValue>> preset;
  for (size_t i = 0; i < spec_.inputs.size(); ++i) {
    if (stream_->scalar_vreg(i) >= 0) preset.push_back({static_cast<int>(i), {register_type(spec_.inputs[i].dtype), stream_->scalar_vreg(i)}});
  }
  const auto out =
      codegen.emit(expr, [&](int i, int vreg) { load_tile(w_, *stream_, i, vreg, c.operand[i], rowbase_[i], c.offset(i)); }, preset);
  const TileValue v = codegen.to_type(out[0], ValueType::F32, true);
  bool is_preset = false;
  for (const auto& p : preset) is_preset |= p.second.reg == v.reg;
  if (is_preset) {  // the value is a scalar operand's register: copy, the caller owns the result
    const int copy = vregs_.take();
    w_.line("vmov v{}, v{}", copy, v.reg);
    return copy;
  }
  return v.reg;
}

void RowwiseBuilder::store_out(int vreg, const Cursors& c) {
  w_.line("{} v{}, m0, s{}, {}, {}", store_mnemonic(spec_.out_dtype), vreg, c.operand[out_], c.offset(out_),
          stream_->row_stride(out_));
}

// Chunks per loop iteration: a chunk's scalar work (cursor steps, the count, the branch, the
// tail mask) would otherwise outlast its DMA. It divides the padded row's chunks, so the last
// iteration stays inside the row's buffers; its chunks past the launch's columns are masked to
// the identity like a ragged chunk (programs without masking serve exactly their columns).
int64_t RowwiseBuilder::chunk_unroll() const {
  int64_t unroll = kRowUnroll;
  while ((stream_->block_cols_padded() / kLanes) % unroll) unroll /= 2;
  return unroll;
}

// Pass 1: value -> scratch, acc (op)= value. Returns acc (per-lane partials). On long rows each
// chunk of an iteration has its own accumulator, combined pairwise once per row: one accumulator
// chains every chunk of a row behind the VPU's latency (2 cycles a chunk, slower than v7's HBM
// delivers a bf16 chunk to a core). Rows of a few iterations keep one: there the extra copies and
// combines per row cost more than the chain.
int RowwiseBuilder::first_pass(const char* combine, float identity) {
  const bool long_rows = stream_->block_cols_padded() / kLanes >= 4 * chunk_unroll();
  const int64_t unroll = long_rows ? chunk_unroll() : 1;
  std::vector<int> acc(unroll);
  acc[0] = constant(identity);
  for (int64_t i = 1; i < unroll; ++i) {
    acc[i] = vregs_.take();
    w_.line("vmov v{}, v{}", acc[i], acc[0]);
  }
  chunk_loop([&](const Cursors& c) {
    const int x = prologue_value(c);
    if (needs_scratch()) store_scratch(x, c);
    mask_tail(x, c);
    w_.line("{} v{}, v{}, v{}", combine, acc[c.tile % unroll], acc[c.tile % unroll], x);
    vregs_.release(x);
  }, identity);
  for (int64_t step = 1; step < unroll; step *= 2) {
    for (int64_t i = 0; i + step < unroll; i += 2 * step) {
      w_.line("{} v{}, v{}, v{}", combine, acc[i], acc[i], acc[i + step]);
      vregs_.release(acc[i + step]);
    }
  }
  return acc[0];
}

bool RowwiseBuilder::needs_scratch() const {
  return spec_.op != RowOp::Sum && spec_.op != RowOp::Mean && spec_.op != RowOp::Max && spec_.op != RowOp::Min &&
         spec_.op != RowOp::Prod;
}

// Sum of squared deviations from `mean` over the scratch row.
int RowwiseBuilder::squared_deviations(int mean) {
  const int acc = constant(0.f);
  chunk_loop([&](const Cursors& c) {
    const int y = vregs_.take();
    load_scratch(y, c);
    w_.line("vsub v{}, v{}, v{}", y, y, mean);
    mask_tail(y, c);
    w_.line("vfma v{}, v{}, v{}, v{}", acc, y, y, acc);
    vregs_.release(y);
  }, 0.f);
  w_.line("vredsum.lane v{}, v{}", acc, acc);
  return acc;
}

// v /= (the launch's column count - minus), in f32 (IEEE division, so a zero count gives inf or
// NaN as torch does).
void RowwiseBuilder::divide_by_cols(int v, int64_t minus) {
  const int t = w_.sregs().take(), f = vregs_.take();
  w_.line("sarg s{}, {}", t, stream_->cols_arg());
  if (minus != 0) w_.line("saddi s{}, s{}, {}", t, t, -minus);
  w_.line("vbcast v{}, s{}", f, t);
  w_.line("vcvt.i2f v{}, v{}", f, f);
  w_.line("vdiv v{}, v{}, v{}", v, v, f);
  vregs_.release(f);
  w_.sregs().release(t);
}

void RowwiseBuilder::store_row_result(int v) {
  w_.line("{} v{}, m{}, s{}, 0, {}", store_mnemonic(spec_.out_dtype), v, lane0_, rowbase_[out_], stream_->element_bytes(out_));
}

// One group of 8 rows: the op's passes over the row's chunks.
void RowwiseBuilder::group() {
  switch (spec_.op) {
    case RowOp::Sum: case RowOp::Mean: case RowOp::Max: case RowOp::Min: case RowOp::Prod: case RowOp::Var:
      return reduction();
    case RowOp::Softmax: case RowOp::LogSoftmax: return softmax();
    case RowOp::LayerNorm: case RowOp::RmsNorm: return norm();
  }
}

void RowwiseBuilder::block(int set, const BlockExtent& e) {
  auto& s = w_.sregs();
  const int groups = s.take(), g = s.take();
  w_.line("saddi s{}, s{}, 7", groups, e.rows);
  w_.line("sshri s{}, s{}, 3", groups, groups);
  for (int r : {e.row0, e.col0, e.rows, e.cols}) s.release(r);
  rowbase_ = stream_->take_buffer_bases(set);
  scratch_base_ = s.take();
  w_.load_immediate(scratch_base_, stream_->extra(set));
  scratch_sreg_ = s.take();
  const std::string loop = w_.new_label("group");
  w_.line("sli s{}, 0", g);
  w_.place(loop);
  group();
  for (size_t i = 0; i < stream_->operand_count(); ++i) {
    const Layout l = stream_->operand(i).layout;
    if (is_rowwise_stored(l)) w_.line("saddi s{}, s{}, {}", rowbase_[i], rowbase_[i], kSublanes * stream_->row_stride(i));
    if (l == Layout::Column) w_.line("saddi s{}, s{}, {}", rowbase_[i], rowbase_[i], kSublanes * stream_->element_bytes(i));
  }
  if (needs_scratch()) w_.line("saddi s{}, s{}, {}", scratch_base_, scratch_base_, kSublanes * scratch_stride());
  w_.line("saddi s{}, s{}, 1", g, g);
  w_.line("blt s{}, s{}, {}", g, groups, loop);
  for (int r : rowbase_) {
    if (r >= 0) s.release(r);
  }
  for (int r : {groups, g, scratch_base_, scratch_sreg_}) s.release(r);
}

}  // namespace rowwise_detail

std::string_view row_op_name(RowOp op) {
  static constexpr std::string_view kNames[] = {"sum", "mean", "max", "min", "var", "softmax", "log_softmax",
                                                "layer_norm", "rms_norm", "prod"};
  return kNames[static_cast<int>(op)];
}

bool row_op_reduces(RowOp op) {
  return op == RowOp::Sum || op == RowOp::Mean || op == RowOp::Max || op == RowOp::Min || op == RowOp::Var ||
         op == RowOp::Prod;
}

isa::Program make_rowwise(const RowwiseSpec& spec, const sim::ChipConfig& chip) {
  if (narrow_rows_serve(spec) && spec.cols == narrow_row_program_cols(spec.cols)) {
    try {
      return make_narrow_row_reduction(spec, chip);
    } catch (const RegisterShortage&) {
      // a prologue too large beside the 16 block vregs: the general kernel serves it
    }
  }
  try {
    return rowwise_detail::RowwiseBuilder(spec, chip, true).build();
  } catch (const RegisterShortage&) {
    return rowwise_detail::RowwiseBuilder(spec, chip, false).build();
  }
}

}  // namespace vtpu::kernels
