// Reductions over narrow rows (at most 64 columns: sum, mean, max, min). The general row kernel
// spends a tile, a cross-lane reduction and a store on every 8 rows whatever their width, so rows
// of 64 reached 7-23% of the HBM bandwidth. Here the rows are reduced a transposed block at a
// time: each of the block's 16 vregs holds 8 rows of every segment, segment s (lanes s*W .. s*W +
// W - 1, W = 32 or 64) reading rows 128 s + 8 v .. through a masked load shifted by s*W lanes;
// `vtrans` turns the block's columns into rows, so each segment's W columns are W/8 vregs whose
// elementwise combination and one sublane reduction give 128 consecutive rows' results in the
// lanes of one vreg, stored with one masked store. Per 128 * 128 / W rows: 128 / W masked loads
// and selects per vreg, one transpose, a few adds and cross-sublane reductions, 128 / W stores.
// Lanes past the launch's columns hold the reduction's identity, so any width up to W is served.
#include <fmt/format.h>

#include <bit>
#include <limits>
#include <map>
#include <optional>

#include "kernels/codegen/asm_writer.h"
#include "kernels/codegen/block_stream.h"
#include "kernels/codegen/tile_codegen.h"
#include "kernels/codegen/vreg_shape.h"
#include "kernels/generators/rowwise.h"

namespace vtpu::kernels {
namespace {

constexpr int64_t kBlockVregs = 16;  // the 128 x 128 block vtrans turns
constexpr uint64_t kNarrowBlockBudgetBytes = 512 * 1024;
constexpr int64_t kMaxImmediateOffset = 32767;  // a vector load's i16 offset

class NarrowRowBuilder {
 public:
  NarrowRowBuilder(const RowwiseSpec& spec, const sim::ChipConfig& chip)
      : spec_(spec), chip_(chip), w_(fmt::format("row_{}_narrow", row_op_name(spec.op))),
        width_(spec.cols), segments_(kLanes / spec.cols) {}

  isa::Program build() {
    std::vector<StreamOperand> operands;
    for (const auto& in : spec_.inputs) operands.push_back({in.dtype, in.layout, false, in.strided});
    out_ = static_cast<int>(operands.size());
    operands.push_back({spec_.out_dtype, Layout::Column, true});
    // The block vregs come first, so the transpose's 16 aligned registers are free.
    block_ = vregs_.take_run(kBlockVregs, kBlockVregs);
    stream_.emplace(w_, chip_, spec_.rows, spec_.cols, operands, kMaxRowCols, kNarrowBlockBudgetBytes, 0, false, group_rows());
    prepare();
    stream_->emit(vregs_, [&](int set, const BlockExtent& e) { block(set, e); });
    return w_.assemble();
  }

 private:
  // Rows one transposed block reduces: 128 per segment.
  int64_t group_rows() const { return kLanes * segments_; }

  bool max_like() const { return spec_.op == RowOp::Max || spec_.op == RowOp::Min; }

  float identity() const {
    constexpr float inf = std::numeric_limits<float>::infinity();
    return spec_.op == RowOp::Max ? -inf : spec_.op == RowOp::Min ? inf : 0.f;
  }

  // Per segment, the mask of its lanes inside the launch's row (lanes [s W, s W + cols)); the
  // identity; the divisor of a mean; the expression's constants, hoisted out of the group loop.
  void prepare() {
    auto& s = w_.sregs();
    scratch_sreg_ = s.take();
    const int lane = vregs_.take(), bound = vregs_.take(), cols = s.take(), t = s.take();
    w_.line("viota v{}", lane);
    w_.load_immediate(t, kLanes - 1);
    w_.line("vbcast v{}, s{}", bound, t);
    w_.line("vand v{}, v{}, v{}", lane, lane, bound);
    w_.line("sarg s{}, {}", cols, stream_->cols_arg());
    const int below = masks_.take();
    for (int64_t seg = 0; seg < segments_; ++seg) {
      segment_masks_.push_back(masks_.take());
      w_.line("saddi s{}, s{}, {}", t, cols, seg * width_);
      w_.line("vbcast v{}, s{}", bound, t);
      w_.line("vicmp.lt m{}, v{}, v{}", segment_masks_.back(), lane, bound);
      if (seg == 0) continue;
      w_.load_immediate(t, seg * width_);
      w_.line("vbcast v{}, s{}", bound, t);
      w_.line("vicmp.lt m{}, v{}, v{}", below, lane, bound);
      w_.line("mnot m{}, m{}", below, below);
      w_.line("mand m{}, m{}, m{}", segment_masks_.back(), segment_masks_.back(), below);
    }
    masks_.release(below);
    store_mask_ = masks_.take();
    if (spec_.op == RowOp::Mean) {
      divisor_ = vregs_.take();
      w_.line("vbcast v{}, s{}", divisor_, cols);
      w_.line("vcvt.i2f v{}, v{}", divisor_, divisor_);
    }
    vregs_.release(lane);
    vregs_.release(bound);
    for (int r : {cols, t}) s.release(r);
    identity_ = TileCodegen(w_, vregs_, masks_, scratch_sreg_).constant_vreg(identity());
    if (spec_.prologue) hoisted_ = hoist_constants(w_, *spec_.prologue, vregs_, scratch_sreg_);
  }

  // Input `i`'s rows 128 seg + 8 v .. + 7 into `vreg`, shifted left by seg * W lanes so their
  // first column lands in the segment; the other lanes read 0.
  void load_segment(size_t i, int vreg, int64_t v, int64_t seg) {
    const int64_t rs = stream_->row_stride(i);
    int64_t offset = (kLanes * seg + kSublanes * v) * rs - seg * width_ * stream_->element_bytes(i);
    int base = rowbase_[i];
    if (offset > kMaxImmediateOffset) {
      const int64_t near = kSublanes * (v % kSublanes) * rs;
      w_.line("saddi s{}, s{}, {}", address_, rowbase_[i], offset - near);
      base = address_;
      offset = near;
    }
    w_.line("{} v{}, m{}, s{}, {}, {}", load_mnemonic(spec_.inputs[i].dtype), vreg, segment_masks_[seg], base, offset, rs);
  }

  // The prologue's value of block vreg `v`'s segment `seg` (its 8 rows 128 seg + 8 v ..), in a
  // fresh f32 vreg; lanes outside the segment are undefined.
  int segment_value(int64_t v, int64_t seg) {
    Expr identity;
    identity.add_output(identity.input(0, register_type(spec_.inputs[0].dtype)));
    const Expr& expr = spec_.prologue ? *spec_.prologue : identity;
    TileCodegen codegen(w_, vregs_, masks_, scratch_sreg_);
    codegen.use_hoisted_constants(&hoisted_);
    std::vector<std::pair<int, TileValue>> preset;
    for (size_t i = 0; i < spec_.inputs.size(); ++i) {
      if (stream_->scalar_vreg(i) >= 0) preset.push_back({static_cast<int>(i), {register_type(spec_.inputs[i].dtype), stream_->scalar_vreg(i)}});
    }
    const auto load = [&](int i, int vreg) { load_segment(size_t(i), vreg, v, seg); };
    const auto out = codegen.emit(expr, load, preset);
    const TileValue value = codegen.to_type(out[0], ValueType::F32, true);
    for (const auto& p : preset) {
      if (p.second.reg != value.reg) continue;
      const int copy = vregs_.take();  // a scalar operand's own register: the caller consumes the value
      w_.line("vmov v{}, v{}", copy, value.reg);
      return copy;
    }
    return value.reg;
  }

  // A sum or mean of a float input as it is: a masked load's lanes outside its segment read 0,
  // the sum's identity, so segment 0 loads straight into its block vreg (a select less per vreg).
  bool loads_into_block() const {
    if (spec_.op != RowOp::Sum && spec_.op != RowOp::Mean) return false;
    if (!dtype_is_float(spec_.inputs[0].dtype) || spec_.inputs[0].layout != Layout::Full) return false;
    if (!spec_.prologue) return true;
    const Expr& e = *spec_.prologue;
    return e.outputs().size() == 1 && e.node(e.outputs()[0]).op == ExprOp::Input && e.node(e.outputs()[0]).input == 0;
  }

  // One transposed block: 128 rows per segment, from s`rowbase_` on.
  void group() {
    const bool direct = loads_into_block();
    for (int64_t v = 0; v < kBlockVregs; ++v) {
      for (int64_t seg = 0; seg < segments_; ++seg) {
        if (direct && seg == 0) {
          load_segment(0, block_ + int(v), v, seg);
          continue;
        }
        const int x = segment_value(v, seg);
        const int previous = seg == 0 ? identity_ : block_ + int(v);
        w_.line("vsel v{}, m{}, v{}, v{}", block_ + v, segment_masks_[seg], x, previous);
        vregs_.release(x);
      }
    }
    w_.line("vtrans v{}, v{}", block_, block_);
    const char* combine = spec_.op == RowOp::Max ? "vmax" : spec_.op == RowOp::Min ? "vmin" : "vadd";
    const int64_t per_segment = width_ / kSublanes;  // vregs holding one segment's columns
    auto& s = w_.sregs();
    const int count = s.take(), most = s.take();
    w_.load_immediate(most, kLanes);
    for (int64_t seg = 0; seg < segments_; ++seg) {
      const int first = block_ + int(seg * per_segment);
      for (int64_t step = 1; step < per_segment; step *= 2) {
        for (int64_t q = 0; q + step < per_segment; q += 2 * step) {
          w_.line("{} v{}, v{}, v{}", combine, first + q, first + q, first + q + step);
        }
      }
      if (spec_.op == RowOp::Min) w_.line("vneg v{}, v{}", first, first);  // the ISA reduces sublanes by sum and max
      w_.line("{} v{}, v{}", max_like() ? "vredmax.sub" : "vredsum.sub", first, first);
      if (spec_.op == RowOp::Min) w_.line("vneg v{}, v{}", first, first);
      if (spec_.op == RowOp::Mean) w_.line("vdiv v{}, v{}, v{}", first, first, divisor_);
      // Sublane 0's lanes below the rows left in this block (every sublane holds the results).
      w_.line("saddi s{}, s{}, {}", count, left_, -seg * kLanes);
      w_.line("smin s{}, s{}, s{}", count, count, most);
      w_.line("vmaskn m{}, s{}", store_mask_, count);
      w_.line("{} v{}, m{}, s{}, {}, 0", store_mnemonic(spec_.out_dtype), first, store_mask_, rowbase_[out_],
              seg * kLanes * stream_->element_bytes(out_));
    }
    s.release(count);
    s.release(most);
  }

  void block(int set, const BlockExtent& e) {
    auto& s = w_.sregs();
    left_ = s.take();
    address_ = s.take();
    w_.line("smov s{}, s{}", left_, e.rows);
    for (int r : {e.row0, e.col0, e.rows, e.cols}) s.release(r);
    rowbase_ = stream_->take_buffer_bases(set);
    const std::string loop = w_.new_label("narrow_group");
    w_.place(loop);
    group();
    for (size_t i = 0; i < stream_->operand_count(); ++i) {
      if (rowbase_[i] < 0) continue;
      const int64_t step = stream_->operand(i).layout == Layout::Column ? stream_->element_bytes(i) : stream_->row_stride(i);
      w_.line("saddi s{}, s{}, {}", rowbase_[i], rowbase_[i], group_rows() * step);
    }
    w_.line("saddi s{}, s{}, {}", left_, left_, -group_rows());
    w_.line("blt s0, s{}, {}", left_, loop);
    for (int r : rowbase_) {
      if (r >= 0) s.release(r);
    }
    s.release(left_);
    s.release(address_);
  }

  const RowwiseSpec& spec_;
  const sim::ChipConfig& chip_;
  AsmWriter w_;
  std::optional<BlockStream> stream_;
  RegisterPool vregs_{"vector registers", 0, 31}, masks_{"mask registers", 1, 7};
  const int64_t width_, segments_;
  int block_ = -1, out_ = -1, identity_ = -1, divisor_ = -1, store_mask_ = -1;
  int scratch_sreg_ = -1, left_ = -1, address_ = -1;
  std::vector<int> segment_masks_, rowbase_;
  std::map<uint32_t, int> hoisted_;
};

}  // namespace

bool narrow_rows_serve(const RowwiseSpec& spec) {
  if (spec.op != RowOp::Sum && spec.op != RowOp::Mean && spec.op != RowOp::Max && spec.op != RowOp::Min) return false;
  if (spec.has_weight || spec.has_bias || spec.cols > kMaxNarrowRowCols) return false;
  for (const auto& in : spec.inputs) {
    if (in.layout != Layout::Full && in.layout != Layout::Scalar) return false;
  }
  return true;
}

int64_t narrow_row_program_cols(int64_t cols) {
  return std::max<int64_t>(kMaxNarrowRowCols / 2, int64_t(std::bit_ceil(uint64_t(cols))));
}

isa::Program make_narrow_row_reduction(const RowwiseSpec& spec, const sim::ChipConfig& chip) {
  if (!narrow_rows_serve(spec) || (spec.cols != kMaxNarrowRowCols && spec.cols != kMaxNarrowRowCols / 2)) {
    throw KernelError(fmt::format("narrow row {}: {} columns", row_op_name(spec.op), spec.cols));
  }
  return NarrowRowBuilder(spec, chip).build();
}

}  // namespace vtpu::kernels
