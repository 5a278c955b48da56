// Per input, rows of the [outer, width] block go through one VMEM staging buffer in chunks; the
// write-back DMA's HBM stride is the output's row length, which places the chunk in its columns.
// One staging buffer and a wait per chunk keep the program short; cat is bandwidth-bound and the
// FIFO HBM timeline serialises the transfers anyway, so double-buffering would only hide latency.
#include "kernels/concat.h"

#include <algorithm>
#include <numeric>

#include "kernels/asm_writer.h"

namespace vtpu::kernels {

isa::Program make_concat(const ConcatSpec& spec, const sim::ChipConfig& chip) {
  if (spec.widths.empty()) throw KernelError("cat: no inputs");
  if (!dtype_on_chip(spec.dtype)) throw KernelError(fmt::format("cat: {} is not supported on the chip", dtype_name(spec.dtype)));
  const int eb = dtype_bytes(spec.dtype);
  const int64_t total = std::accumulate(spec.widths.begin(), spec.widths.end(), int64_t{0});
  if (spec.outer * total >= (int64_t{1} << 31)) throw KernelError("cat: output too large for one launch");
  const uint64_t staging = std::min<uint64_t>(chip.vmem_bytes / 2, 512 * 1024);
  AsmWriter w("concat");
  std::vector<int> args;
  for (size_t i = 0; i < spec.widths.size(); ++i) args.push_back(w.argument(fmt::format("in{}", i), isa::ArgumentKind::Buffer));
  const int out_arg = w.argument("out", isa::ArgumentKind::Buffer);
  auto& s = w.sregs();
  const int row = s.take(), rows = s.take(), n = s.take(), vm = s.take(), hb = s.take(), bytes = s.take(), t = s.take(),
            outer = s.take(), hs = s.take();
  w.load_immediate(outer, spec.outer);
  w.line("sli s{}, 0", vm);
  int64_t column = 0;
  for (size_t i = 0; i < spec.widths.size(); ++i) {
    const int64_t width_bytes = spec.widths[i] * eb;
    // A row wider than the staging buffer goes in column pieces (strided DMAs on both sides).
    const int64_t piece_limit = int64_t(staging) / eb * eb;
    for (int64_t start = 0; start < width_bytes; start += piece_limit) {
      const int64_t piece = std::min(piece_limit, width_bytes - start);
      const int64_t chunk_rows = std::max<int64_t>(1, int64_t(staging) / piece);
      const std::string loop = w.new_label("cat_rows");
      w.line("sli s{}, 0", row);
      w.place(loop);
      w.load_immediate(n, chunk_rows);
      w.line("ssub s{}, s{}, s{}", rows, outer, row);
      w.line("smin s{}, s{}, s{}", rows, rows, n);
      w.load_immediate(bytes, piece);
      // gather the piece of rows [row, row + rows) of input i, dense in VMEM
      w.line("sarg s{}, {}", hb, args[i]);
      w.add_scaled(hb, row, width_bytes, t);
      w.line("saddi s{}, s{}, {}", hb, hb, start);
      w.load_immediate(hs, width_bytes);
      w.line("dma.h2v dq0, sem0, s{}, s{}, s{}, s{}, s{}, s{}", vm, hb, rows, bytes, bytes, hs);
      w.line("sem.wait sem0, 1");
      // write it to its columns of the output rows
      w.line("sarg s{}, {}", hb, out_arg);
      w.add_scaled(hb, row, total * eb, t);
      w.line("saddi s{}, s{}, {}", hb, hb, column * eb + start);
      w.load_immediate(hs, total * eb);
      w.line("dma.v2h dq1, sem1, s{}, s{}, s{}, s{}, s{}, s{}", vm, hb, rows, bytes, bytes, hs);
      w.line("sem.wait sem1, 1");  // the staging buffer is reused by the next chunk
      w.line("sadd s{}, s{}, s{}", row, row, rows);
      w.line("blt s{}, s{}, {}", row, outer, loop);
    }
    column += spec.widths[i];
  }
  for (int x : {row, rows, n, vm, hb, bytes, t, outer, hs}) s.release(x);
  return w.assemble();
}

}  // namespace vtpu::kernels
