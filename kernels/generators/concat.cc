// Per input, rows of the [outer, width] block go through one VMEM staging buffer in chunks; the
// write-back DMA's HBM stride is the output's row length, which places the chunk in its columns.
// A row wider than the staging buffer goes in column pieces (strided DMAs on both sides). One
// staging buffer and a wait per chunk keep the program short; cat is bandwidth-bound and the FIFO
// HBM timeline serialises the transfers anyway, so double-buffering would only hide latency.
#include "kernels/generators/concat.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "kernels/codegen/asm_writer.h"

namespace vtpu::kernels {

std::vector<int32_t> concat_scalars(const ConcatSpec& spec) {
  if (spec.widths.empty()) throw KernelError("cat: no inputs");
  const int64_t total = std::accumulate(spec.widths.begin(), spec.widths.end(), int64_t{0});
  if (spec.outer < 0 || std::any_of(spec.widths.begin(), spec.widths.end(), [](int64_t w) { return w < 0; })) {
    throw KernelError("cat: negative extents");
  }
  if (spec.outer * total * dtype_bytes(spec.dtype) >= (int64_t{1} << 31)) throw KernelError("cat: output too large for one launch");
  std::vector<int32_t> out{int32_t(spec.outer)};
  for (int64_t w : spec.widths) out.push_back(int32_t(w));
  return out;
}

isa::Program make_concat(DType dtype, int inputs, const sim::ChipConfig& chip) {
  if (inputs < 1) throw KernelError("cat: no inputs");
  if (!dtype_on_chip(dtype)) throw KernelError(fmt::format("cat: {} is not supported on the chip", dtype_name(dtype)));
  const int eb = dtype_bytes(dtype);
  const int64_t staging = std::min<int64_t>(int64_t(chip.kernel_vmem_bytes()) / 2, 512 * 1024);
  const int64_t piece_limit = staging / eb * eb;
  AsmWriter w("concat");
  std::vector<int> args;
  for (int i = 0; i < inputs; ++i) args.push_back(w.argument(fmt::format("in{}", i), isa::ArgumentKind::Buffer));
  const int out_arg = w.argument("out", isa::ArgumentKind::Buffer);
  const int outer_arg = w.argument("outer", isa::ArgumentKind::Scalar);
  std::vector<int> width_args;
  for (int i = 0; i < inputs; ++i) width_args.push_back(w.argument(fmt::format("width{}", i), isa::ArgumentKind::Scalar));
  auto& s = w.sregs();
  const int row = s.take(), rows = s.take(), chunk_rows = s.take(), vm = s.take(), hb = s.take(), piece = s.take(),
            t = s.take(), outer = s.take(), total = s.take(), column = s.take(), wb = s.take(), start = s.take(),
            limit = s.take();
  w.line("sarg s{}, {}", outer, outer_arg);
  w.line("sli s{}, 0", total);  // output row bytes
  for (int a : width_args) {
    w.line("sarg s{}, {}", t, a);
    w.line("sadd s{}, s{}, s{}", total, total, t);
  }
  w.line("smuli s{}, s{}, {}", total, total, eb);
  w.line("sli s{}, 0", vm);
  w.line("sli s{}, 0", column);
  w.load_immediate(limit, piece_limit);
  for (int i = 0; i < inputs; ++i) {
    const std::string pieces = w.new_label("cat_pieces"), rows_loop = w.new_label("cat_rows"),
                      rows_done = w.new_label("cat_rows_done"), done = w.new_label("cat_input_done");
    w.line("sarg s{}, {}", wb, width_args[i]);
    w.line("smuli s{}, s{}, {}", wb, wb, eb);
    w.line("sli s{}, 0", start);
    w.place(pieces);
    w.line("bge s{}, s{}, {}", start, wb, done);
    w.line("ssub s{}, s{}, s{}", piece, wb, start);
    w.line("smin s{}, s{}, s{}", piece, piece, limit);
    w.load_immediate(chunk_rows, staging);
    w.line("sdiv s{}, s{}, s{}", chunk_rows, chunk_rows, piece);  // >= 1: a piece fits the staging buffer
    w.line("sli s{}, 0", row);
    w.place(rows_loop);
    w.line("bge s{}, s{}, {}", row, outer, rows_done);
    w.line("ssub s{}, s{}, s{}", rows, outer, row);
    w.line("smin s{}, s{}, s{}", rows, rows, chunk_rows);
    // gather the piece of rows [row, row + rows) of input i, dense in VMEM
    w.line("sarg s{}, {}", hb, args[i]);
    w.line("smul s{}, s{}, s{}", t, row, wb);
    w.line("sadd s{}, s{}, s{}", hb, hb, t);
    w.line("sadd s{}, s{}, s{}", hb, hb, start);
    w.dma_to_vmem(0, 0, {.vmem = vm, .hbm = hb, .rows = rows, .row_bytes = piece, .vmem_stride = piece, .hbm_stride = wb});
    w.line("sem.wait sem0, 1");
    // write it to its columns of the output rows
    w.line("sarg s{}, {}", hb, out_arg);
    w.line("smul s{}, s{}, s{}", t, row, total);
    w.line("sadd s{}, s{}, s{}", hb, hb, t);
    w.line("sadd s{}, s{}, s{}", hb, hb, column);
    w.line("sadd s{}, s{}, s{}", hb, hb, start);
    w.dma_to_hbm(1, 1, {.vmem = vm, .hbm = hb, .rows = rows, .row_bytes = piece, .vmem_stride = piece, .hbm_stride = total});
    w.line("sem.wait sem1, 1");  // the staging buffer is reused by the next chunk
    w.line("sadd s{}, s{}, s{}", row, row, rows);
    w.line("jmp {}", rows_loop);
    w.place(rows_done);
    w.line("sadd s{}, s{}, s{}", start, start, limit);
    w.line("jmp {}", pieces);
    w.place(done);
    w.line("sadd s{}, s{}, s{}", column, column, wb);
  }
  for (int x : {row, rows, chunk_rows, vm, hb, piece, t, outer, total, column, wb, start, limit}) s.release(x);
  return w.assemble();
}

}  // namespace vtpu::kernels
