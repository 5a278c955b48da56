// See windows.h.
#include "kernels/compose/windows.h"

#include <fmt/format.h>

#include <algorithm>

#include "kernels/codegen/asm_writer.h"

namespace vtpu::kernels {

Windows windows_of(const std::vector<int64_t>& buf, int64_t c0, int64_t channels, Pair kernel, Pair kernel_step, Pair origin,
                   Pair out, Pair stride) {
  const int64_t plane = buf[2] * buf[3], row = buf[3];
  Windows w;
  w.c = {channels, plane};
  w.i = {kernel[0], kernel_step[0] * row};
  w.j = {kernel[1], kernel_step[1]};
  w.n = {buf[0], buf[1] * plane};
  w.y = {out[0], stride[0] * row};
  w.x = {out[1], stride[1]};
  w.offset = c0 * plane + origin[0] * row + origin[1];
  return w;
}

int gather(Graph& g, int buf, const Windows& w, std::initializer_list<Axis> order, std::vector<int64_t> shape) {
  std::vector<int64_t> sizes, strides;
  for (const Axis& a : order) {
    sizes.push_back(a.size);
    strides.push_back(a.stride);
  }
  return g.reshape(g.strided_copy(buf, sizes, strides, w.offset, "im2col"), std::move(shape));
}

int gather_by_tap(Graph& g, int buf, const Windows& w) {
  return gather(g, buf, w, {w.i, w.j, w.n, w.c, w.y, w.x}, {w.taps(), w.n.size, w.c.size, w.positions()});
}

int pad_hw(Graph& g, int x, Pair before, Pair after, double value) {
  x = g.pad(x, 2, before[0], after[0], value, "pad_hw");
  return g.pad(x, 3, before[1], after[1], value, "pad_hw");
}

int dilate_and_pad_for_flipped_reads(Graph& g, int grad, Pair kernel, Pair input_hw, Pair stride, Pair padding, Pair dilation,
                                     Pair& origin) {
  // Dilate: each value followed by stride - 1 zeros (a zero block concatenated on a new axis).
  const auto shape = g.node(grad).type.shape;
  Pair dilated{shape[2], shape[3]};
  for (int d = 0; d < 2; ++d) {
    if (stride[d] == 1) continue;
    auto s = g.node(grad).type.shape;
    std::vector<int64_t> split(s.begin(), s.begin() + 3 + d);
    split.push_back(1);
    split.insert(split.end(), s.begin() + 3 + d, s.end());
    grad = g.pad(g.reshape(grad, split), 3 + d, 0, stride[d] - 1, 0, "dilate");
    dilated[d] *= stride[d];
    s[2 + d] = dilated[d];
    grad = g.reshape(grad, s);
  }
  // Input position h reads dilated rows h + padding - i * dilation for taps i: shifted by
  // (k - 1) * dilation so that every read lands at or after row 0, and padded after up to the last.
  Pair lead, tail;
  for (int d = 0; d < 2; ++d) {
    lead[d] = (kernel[d] - 1) * dilation[d];
    tail[d] = std::max<int64_t>(0, input_hw[d] + padding[d] - dilated[d]);
    origin[d] = padding[d] + lead[d];
  }
  return pad_hw(g, grad, lead, tail);
}

int col2im(Graph& g, int values, Pair kernel, Pair input_hw, Pair stride, Pair padding, Pair dilation) {
  const auto s = g.node(values).type.shape;  // [T, C, OH, OW]
  if (s.size() != 4 || s[0] != kernel[0] * kernel[1]) {
    throw KernelError(fmt::format("col2im: {} is not [taps, C, OH, OW] for a {}x{} kernel", to_string(g.node(values).type), kernel[0], kernel[1]));
  }
  Pair origin;
  const int ext = dilate_and_pad_for_flipped_reads(g, values, kernel, input_hw, stride, padding, dilation, origin);
  const auto buf = g.node(ext).type.shape;
  const int64_t plane = buf[2] * buf[3], tap_plane = buf[1] * plane;
  // As the input gradient's windows (flipped, unit stride), with tap (i, j) read from plane i * kw + j.
  Windows w = windows_of({1, buf[1], buf[2], buf[3]}, 0, buf[1], kernel, {-dilation[0], -dilation[1]}, origin, input_hw, {1, 1});
  w.i.stride += kernel[1] * tap_plane;
  w.j.stride += tap_plane;
  const int by_tap = gather(g, ext, w, {w.i, w.j, w.c, w.y, w.x}, {w.taps(), buf[1] * input_hw[0] * input_hw[1]});
  return g.reshape(g.column_reduce(RowOp::Sum, by_tap, "col2im"), {buf[1], input_hw[0], input_hw[1]});
}

namespace {

// Along one spatial dim of col2im: output position y = r + stride * m (phase r) takes tap i's
// value from window row m + shift[i] when (r + padding - i * dilation) is a multiple of the
// stride, which holds for exactly one phase per tap: phase[i].
struct PhaseSplit {
  int64_t stride = 1, rows = 0;          // rows: of the widest phase (phase 0), ceil(size / stride)
  std::vector<int64_t> phase, shift;     // per tap
  std::vector<int64_t> phase_rows;       // per phase: ceil((size - r) / stride), 0 past the size
  int64_t pad_before = 0, pad_after = 0;  // window rows read outside [0, windows)

  PhaseSplit(int64_t taps, int64_t windows, int64_t size, int64_t stride_, int64_t padding, int64_t dilation) : stride(stride_) {
    rows = (size + stride - 1) / stride;
    for (int64_t r = 0; r < stride; ++r) phase_rows.push_back(r < size ? (size - r + stride - 1) / stride : 0);
    for (int64_t i = 0; i < taps; ++i) {
      const int64_t r = ((i * dilation - padding) % stride + stride) % stride;
      const int64_t q = (r + padding - i * dilation) / stride;
      phase.push_back(r);
      shift.push_back(q);
      pad_before = std::max(pad_before, -q);
      pad_after = std::max(pad_after, q + phase_rows[r] - windows);
    }
  }
};

// Where col2im finds tap t's value of window (row, col) of batch b, lane l, in its padded buffer:
// b * batch + row * row_step + col * col_step + t * tap + l.
struct ValuesLayout {
  int64_t batches = 1, lanes = 1, batch = 0, row_step = 0, col_step = 0, tap = 0;
};

// Each phase of the output: its taps' shifted windows summed in tap order (the CPU's col2im adds
// taps in that order into a zeroed image, so the sums are its sums), padded to the widest phase,
// then the phases interleaved: out[b, rh + sh * m, rw + sw * n, l] = phase (rh, rw)[b, m, n, l]
// (copies of rows of L values). Returns [B, H, W, L].
int sum_phases(Graph& g, int buf, const ValuesLayout& v, const PhaseSplit& h, const PhaseSplit& w, Pair kernel, Pair out_hw) {
  const auto dims = [&](int64_t b, int64_t m, int64_t n) { return std::vector<int64_t>{b, m, n, v.lanes}; };
  const std::vector<int64_t> window_strides{v.batch, v.row_step, v.col_step, 1};
  std::vector<int> phases;
  for (int64_t rh = 0; rh < h.stride; ++rh) {
    for (int64_t rw = 0; rw < w.stride; ++rw) {
      const int64_t m = h.phase_rows[rh], n = w.phase_rows[rw];
      int sum = -1;
      for (int64_t i = 0; i < kernel[0] && m > 0 && n > 0; ++i) {
        for (int64_t j = 0; j < kernel[1]; ++j) {
          if (h.phase[i] != rh || w.phase[j] != rw) continue;
          const int64_t at = (i * kernel[1] + j) * v.tap + (h.shift[i] + h.pad_before) * v.row_step +
                             (w.shift[j] + w.pad_before) * v.col_step;
          const int window = g.strided_copy(buf, dims(v.batches, m, n), window_strides, at, "col2im");
          sum = sum < 0 ? window : g.binary(ExprOp::Add, sum, window, "col2im");
        }
      }
      if (sum < 0) {
        sum = g.full({dims(v.batches, h.rows, w.rows), DType::F32}, 0, "col2im");
      } else {
        if (m < h.rows) sum = g.pad(sum, 1, 0, h.rows - m, 0, "col2im");
        if (n < w.rows) sum = g.pad(sum, 2, 0, w.rows - n, 0, "col2im");
      }
      phases.push_back(sum);
    }
  }
  int out = phases[0];
  if (phases.size() > 1) {
    out = g.reshape(g.concat(phases, 0, "col2im"), {h.stride, w.stride, v.batches, h.rows, w.rows, v.lanes});
    out = g.permute(out, {2, 3, 0, 4, 1, 5}, "col2im");
  }
  const int64_t full_h = h.rows * h.stride, full_w = w.rows * w.stride;
  out = g.reshape(out, dims(v.batches, full_h, full_w));
  if (full_h == out_hw[0] && full_w == out_hw[1]) return out;
  return g.strided_copy(out, dims(v.batches, out_hw[0], out_hw[1]), {full_h * full_w * v.lanes, full_w * v.lanes, v.lanes, 1}, 0,
                        "col2im");
}

}  // namespace

int col2im_channels_last(Graph& g, int values, Pair kernel, Pair output_hw, Pair stride, Pair padding, Pair dilation) {
  const auto s = g.node(values).type.shape;  // [B, OH, OW, T * L]
  const int64_t taps = kernel[0] * kernel[1];
  if (s.size() != 4 || s[3] % taps != 0 || g.node(values).type.dtype != DType::F32) {
    throw KernelError(fmt::format("col2im: {} is not f32 [B, OH, OW, taps x lanes] for a {}x{} kernel", to_string(g.node(values).type),
                                  kernel[0], kernel[1]));
  }
  const PhaseSplit h(kernel[0], s[1], output_hw[0], stride[0], padding[0], dilation[0]);
  const PhaseSplit w(kernel[1], s[2], output_hw[1], stride[1], padding[1], dilation[1]);
  int buf = g.pad(values, 1, h.pad_before, h.pad_after, 0, "col2im");
  buf = g.pad(buf, 2, w.pad_before, w.pad_after, 0, "col2im");
  const auto b = g.node(buf).type.shape;
  const ValuesLayout layout{s[0], s[3] / taps, b[1] * b[2] * b[3], b[2] * b[3], b[3], s[3] / taps};
  return sum_phases(g, buf, layout, h, w, kernel, output_hw);
}

}  // namespace vtpu::kernels
