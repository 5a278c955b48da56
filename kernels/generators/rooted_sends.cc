// Collectives with one sender or one receiver: a send, and a scatter from or a gather to a root.
// Each piece goes straight to its chip in one remote DMA along the links' route (dimension
// order, the shorter way round a ring), so their time is the busiest link's, emerging from the
// link model: for a scatter or gather, the root's own links carry every chunk.
#include <string>
#include <vector>

#include "kernels/codegen/asm_writer.h"
#include "kernels/generators/collective_axis.h"
#include "kernels/generators/collectives.h"

namespace vtpu::kernels {
namespace {

int chips_of(const SliceShape& slice) {
  int chips = 1;
  for (int n : slice.axes) chips *= n;
  return chips;
}

// A scatter (root sends) or a gather (root receives) of equal chunks.
isa::Program rooted(const SliceShape& slice, bool scatter) {
  const char* name = scatter ? "scatter" : "gather";
  check_slice_shape(slice, name);
  const int chips = chips_of(slice);
  AsmWriter w(name);
  const int data_arg = w.argument("data", isa::ArgumentKind::Buffer);
  const int chunk_arg = w.argument("chunk_bytes", isa::ArgumentKind::Scalar);
  const int root_arg = w.argument("root", isa::ArgumentKind::Scalar);
  auto& s = w.sregs();
  const int rank = s.take(), data = s.take(), chunk = s.take(), root = s.take(), peer = s.take(), address = s.take(),
            count = s.take();
  w.line("schip s{}", rank);
  w.line("sarg s{}, {}", data, data_arg);
  w.line("sarg s{}, {}", chunk, chunk_arg);
  w.line("sarg s{}, {}", root, root_arg);
  w.line("sli s{}, {}", count, chips);
  const std::string not_root = w.new_label("not_root"), done = w.new_label("done");
  w.line("bne s{}, s{}, {}", rank, root, not_root);
  if (scatter) {  // the root sends every other chip its chunk
    for (int k : nearest_first(chips)) {
      w.line("saddi s{}, s{}, {}", peer, root, k);
      w.line("srem s{}, s{}, s{}", peer, peer, count);
      w.line("smul s{}, s{}, s{}", address, peer, chunk);
      w.line("sadd s{}, s{}, s{}", address, address, data);
      w.line("dma.remote dq{}, sem{}, sem{}, s{}, s{}, s{}, s{}", k % 2 ? kForwardQueue : kBackwardQueue, kSent,
             kFromPrevious, peer, address, address, chunk);
    }
    wait_for_signals(w, kSent, chips - 1);
  } else {  // the root waits for every other chip's chunk
    wait_for_signals(w, kFromPrevious, chips - 1);
  }
  w.line("jmp {}", done);
  w.place(not_root);
  if (scatter) {
    w.line("sem.wait sem{}, 1", kFromPrevious);
  } else {  // send this chip's chunk to the same place on the root
    w.line("smul s{}, s{}, s{}", address, rank, chunk);
    w.line("sadd s{}, s{}, s{}", address, address, data);
    w.line("dma.remote dq{}, sem{}, sem{}, s{}, s{}, s{}, s{}", kForwardQueue, kSent, kFromPrevious, root, address,
           address, chunk);
    w.line("sem.wait sem{}, 1", kSent);
  }
  w.place(done);
  return w.assemble();
}

}  // namespace

isa::Program make_send(const SliceShape& slice, const sim::ChipConfig& chip) {
  (void)chip;
  check_slice_shape(slice, "send");
  AsmWriter w("send");
  const int data_arg = w.argument("data", isa::ArgumentKind::Buffer);
  const int bytes_arg = w.argument("bytes", isa::ArgumentKind::Scalar);
  const int src_arg = w.argument("src", isa::ArgumentKind::Scalar);
  const int dst_arg = w.argument("dst", isa::ArgumentKind::Scalar);
  auto& s = w.sregs();
  const int rank = s.take(), data = s.take(), bytes = s.take(), src = s.take(), dst = s.take();
  w.line("schip s{}", rank);
  w.line("sarg s{}, {}", data, data_arg);
  w.line("sarg s{}, {}", bytes, bytes_arg);
  w.line("sarg s{}, {}", src, src_arg);
  w.line("sarg s{}, {}", dst, dst_arg);
  const std::string not_sender = w.new_label("not_sender"), done = w.new_label("done");
  w.line("bne s{}, s{}, {}", rank, src, not_sender);
  w.line("dma.remote dq{}, sem{}, sem{}, s{}, s{}, s{}, s{}", kForwardQueue, kSent, kFromPrevious, dst, data, data, bytes);
  w.line("sem.wait sem{}, 1", kSent);
  w.place(not_sender);
  w.line("bne s{}, s{}, {}", rank, dst, done);
  w.line("sem.wait sem{}, 1", kFromPrevious);
  w.place(done);
  return w.assemble();
}

isa::Program make_scatter(const SliceShape& slice, const sim::ChipConfig& chip) {
  (void)chip;
  return rooted(slice, true);
}

isa::Program make_gather(const SliceShape& slice, const sim::ChipConfig& chip) {
  (void)chip;
  return rooted(slice, false);
}

}  // namespace vtpu::kernels
