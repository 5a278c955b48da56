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

}  // namespace vtpu::kernels
