// The all-to-all as direct sends: chip r sends its chunk j straight to chip j, and the links route
// it through the torus (dimension order, the shorter way round a ring), so its time is what the
// busiest link carries plus the hops, emerging from the link model rather than a formula. Chip r
// sends to r + 1, r - 1, r + 2, r - 2, ... in turn: the chips' first transfers start on
// different links, both directions at once.
#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "kernels/codegen/asm_writer.h"
#include "kernels/generators/collective_axis.h"
#include "kernels/generators/collectives.h"

namespace vtpu::kernels {
namespace {

constexpr int64_t kCopyPieceBytes = 256 * 1024;  // the chip's own chunk goes through VMEM in these
constexpr int kLocalQueue = 2, kLocalSem = 3;

}  // namespace

isa::Program make_all_to_all(const SliceShape& slice, const sim::ChipConfig& chip) {
  check_slice_shape(slice, "all_to_all");
  const int64_t staging = std::min<int64_t>(kCopyPieceBytes, int64_t(chip.kernel_vmem_bytes()) / 2);
  int chips = 1;
  for (int n : slice.axes) chips *= n;
  AsmWriter w("all_to_all");
  const int in_arg = w.argument("input", isa::ArgumentKind::Buffer);
  const int out_arg = w.argument("output", isa::ArgumentKind::Buffer);
  const int chunk_arg = w.argument("chunk_bytes", isa::ArgumentKind::Scalar);
  auto& s = w.sregs();
  const int rank = s.take(), in = s.take(), out = s.take(), chunk = s.take(), to = s.take(), src = s.take(), dst = s.take(),
            t = s.take();
  w.line("schip s{}", rank);
  w.line("sarg s{}, {}", in, in_arg);
  w.line("sarg s{}, {}", out, out_arg);
  w.line("sarg s{}, {}", chunk, chunk_arg);
  w.line("smul s{}, s{}, s{}", dst, rank, chunk);
  w.line("sadd s{}, s{}, s{}", dst, dst, out);  // every chunk lands in slot `rank` of its output
  w.line("sli s{}, {}", t, chips);
  for (int k : nearest_first(chips)) {  // r + 1, r - 1, r + 2, r - 2, ... (mod chips)
    w.line("saddi s{}, s{}, {}", to, rank, k);
    w.line("srem s{}, s{}, s{}", to, to, t);
    w.line("smul s{}, s{}, s{}", src, to, chunk);
    w.line("sadd s{}, s{}, s{}", src, src, in);
    w.line("dma.remote dq{}, sem{}, sem{}, s{}, s{}, s{}, s{}", k % 2 ? kForwardQueue : kBackwardQueue, kSent,
           kFromPrevious, to, dst, src, chunk);
  }
  // the chip's own chunk: input slot `rank` to output slot `rank`, through VMEM
  const int piece = s.take(), end = s.take(), bytes = s.take(), vmem = s.take(), one = s.take(), limit = s.take();
  w.line("smul s{}, s{}, s{}", piece, rank, chunk);
  w.line("sadd s{}, s{}, s{}", end, piece, chunk);
  w.line("sli s{}, 0", vmem);
  w.line("sli s{}, 1", one);
  w.load_immediate(limit, staging);
  const std::string loop = w.new_label("own_piece"), done = w.new_label("own_done");
  w.place(loop);
  w.line("bge s{}, s{}, {}", piece, end, done);
  w.line("ssub s{}, s{}, s{}", bytes, end, piece);
  w.line("smin s{}, s{}, s{}", bytes, bytes, limit);
  w.line("sadd s{}, s{}, s{}", src, in, piece);
  w.dma_to_vmem(kLocalQueue, kLocalSem, {.vmem = vmem, .hbm = src, .rows = one, .row_bytes = bytes, .vmem_stride = bytes, .hbm_stride = bytes});
  w.line("sem.wait sem{}, 1", kLocalSem);
  w.line("sadd s{}, s{}, s{}", dst, out, piece);
  w.dma_to_hbm(kLocalQueue, kLocalSem, {.vmem = vmem, .hbm = dst, .rows = one, .row_bytes = bytes, .vmem_stride = bytes, .hbm_stride = bytes});
  w.line("sem.wait sem{}, 1", kLocalSem);
  w.line("sadd s{}, s{}, s{}", piece, piece, bytes);
  w.line("jmp {}", loop);
  w.place(done);
  wait_for_signals(w, kFromPrevious, chips - 1);  // every other chip's chunk has landed
  wait_for_signals(w, kSent, chips - 1);          // and every send of this chip
  return w.assemble();
}

}  // namespace vtpu::kernels
