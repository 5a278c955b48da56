// The row kernels' passes per op: reductions (sum, mean, max, min, prod, var), softmax and
// log_softmax, layer_norm and rms_norm (rowwise_builder.h).
#include "kernels/generators/rowwise_builder.h"

#include <fmt/format.h>

namespace vtpu::kernels::rowwise_detail {

// sum, mean, max, min, prod, var: one value per row.
void RowwiseBuilder::reduction() {
  constexpr float inf = std::numeric_limits<float>::infinity();
  switch (spec_.op) {
    case RowOp::Sum: case RowOp::Mean: {
      const int acc = first_pass("vadd", 0.f);
      w_.line("vredsum.lane v{}, v{}", acc, acc);
      if (spec_.op == RowOp::Mean) divide_by_cols(acc);
      store_row_result(acc);
      vregs_.release(acc);
      break;
    }
    case RowOp::Max: case RowOp::Min: {
      const bool max = spec_.op == RowOp::Max;
      const int acc = first_pass(max ? "vmax" : "vmin", max ? -inf : inf);
      w_.line("{} v{}, v{}", max ? "vredmax.lane" : "vredmin.lane", acc, acc);
      store_row_result(acc);
      vregs_.release(acc);
      break;
    }
    case RowOp::Prod: {
      // The ISA has no product across lanes: each lane's partial product is broadcast and
      // multiplied in, lane by lane (128 cross-lane broadcasts per 8 rows; fine for the small
      // products models take, slow for long rows). The order differs from torch's left to right.
      const int acc = first_pass("vmul", 1.f), product = constant(1.f), lane = vregs_.take();
      for (int l = 0; l < kLanes; ++l) {
        w_.line("vbcast.lane v{}, v{}, {}", lane, acc, l);
        w_.line("vmul v{}, v{}, v{}", product, product, lane);
      }
      store_row_result(product);
      for (int v : {acc, product, lane}) vregs_.release(v);
      break;
    }
    case RowOp::Var: {
      const int mean = first_pass("vadd", 0.f);
      w_.line("vredsum.lane v{}, v{}", mean, mean);
      divide_by_cols(mean);
      const int var = squared_deviations(mean);
      divide_by_cols(var, spec_.correction);
      store_row_result(var);
      vregs_.release(mean);
      vregs_.release(var);
      break;
    }
    default: break;
  }
}

// softmax and log_softmax: the row maximum, the sum of exponentials, then each element.
void RowwiseBuilder::softmax() {
  constexpr float inf = std::numeric_limits<float>::infinity();
  const int m = first_pass("vmax", -inf);
  w_.line("vredmax.lane v{}, v{}", m, m);
  const int sum = constant(0.f);
  chunk_loop([&](const Cursors& c) {
    const int e = vregs_.take();
    load_scratch(e, c);
    w_.line("vsub v{}, v{}, v{}", e, e, m);
    w_.line("vexp v{}, v{}", e, e);
    if (spec_.op == RowOp::Softmax) store_scratch(e, c);
    mask_tail(e, c);
    w_.line("vadd v{}, v{}, v{}", sum, sum, e);
    vregs_.release(e);
  }, 0.f);
  w_.line("vredsum.lane v{}, v{}", sum, sum);
  if (spec_.op == RowOp::LogSoftmax) {  // x - (max + log(sum))
    w_.line("vlog v{}, v{}", sum, sum);
    w_.line("vadd v{}, v{}, v{}", sum, sum, m);
  }
  chunk_loop([&](const Cursors& c) {
    const int y = vregs_.take();
    load_scratch(y, c);
    if (spec_.op == RowOp::Softmax) w_.line("vdiv v{}, v{}, v{}", y, y, sum);
    else w_.line("vsub v{}, v{}, v{}", y, y, sum);
    store_out(y, c);
    vregs_.release(y);
  });
  vregs_.release(m);
  vregs_.release(sum);
}

// layer_norm and rms_norm: the row statistics, then each element scaled (and shifted).
void RowwiseBuilder::norm() {
  const bool layer = spec_.op == RowOp::LayerNorm;
  int mean = -1, inv;
  if (layer) {
    mean = first_pass("vadd", 0.f);
    w_.line("vredsum.lane v{}, v{}", mean, mean);
    divide_by_cols(mean);
    inv = squared_deviations(mean);
  } else {
    inv = constant(0.f);
    chunk_loop([&](const Cursors& c) {
      const int x = prologue_value(c);
      store_scratch(x, c);
      mask_tail(x, c);
      w_.line("vfma v{}, v{}, v{}, v{}", inv, x, x, inv);
      vregs_.release(x);
    }, 0.f);
    w_.line("vredsum.lane v{}, v{}", inv, inv);
  }
  divide_by_cols(inv);  // biased variance / mean square, as torch's norms use
  const int eps = constant(static_cast<float>(spec_.eps));
  w_.line("vadd v{}, v{}, v{}", inv, inv, eps);
  vregs_.release(eps);
  w_.line("vrsqrt v{}, v{}", inv, inv);
  chunk_loop([&](const Cursors& c) {
    const int y = vregs_.take();
    load_scratch(y, c);
    if (layer) w_.line("vsub v{}, v{}, v{}", y, y, mean);
    w_.line("vmul v{}, v{}, v{}", y, y, inv);
    const int t = vregs_.take();
    if (weight_ >= 0) {
      load_tile(w_, *stream_, weight_, t, c.operand[weight_], -1, c.offset(weight_));
      w_.line("vmul v{}, v{}, v{}", y, y, t);
    }
    if (bias_ >= 0) {
      load_tile(w_, *stream_, bias_, t, c.operand[bias_], -1, c.offset(bias_));
      w_.line("vadd v{}, v{}, v{}", y, y, t);
    }
    vregs_.release(t);
    store_out(y, c);
    vregs_.release(y);
  });
  if (mean >= 0) vregs_.release(mean);
  vregs_.release(inv);
}

}  // namespace vtpu::kernels::rowwise_detail
