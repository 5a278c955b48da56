// The all-gather. Each step forwards what the previous step delivered, so a step costs one block
// over one link plus a hop; the sends of a step go out as soon as that step's blocks have landed.
#include "kernels/generators/collectives.h"

#include "kernels/codegen/asm_writer.h"
#include "kernels/generators/collective_axis.h"

namespace vtpu::kernels {
namespace {

class AllGatherAxis {
 public:
  AllGatherAxis(AsmWriter& w, CollectiveAxis& axis, int sent) : w_(w), a_(axis), sent_(sent) {}

  // Step k sends forward the block from k - 1 chips back and backward the one from k - 1 ahead,
  // each only while it has somewhere to go; it first waits for what step k - 1 delivered.
  void line() {
    const int n = a_.n(), address = w_.sregs().take();
    for (int k = 1; k < n; ++k) {
      if (k >= 2) wait_line_step(k - 1);
      for (bool forward : {true, false}) {
        a_.if_on_axis(forward ? -(k - 1) : k - 1, [&] {
          a_.if_on_axis(forward ? 1 : -1, [&] {
            a_.block_address(address, forward ? -(k - 1) : k - 1);
            send(forward, address, a_.block());
          });
        });
      }
    }
    wait_line_step(n - 1);
    w_.sregs().release(address);
  }

  // Every chip sends both ways at every step; with n even, the block opposite goes half each way
  // at the last step (the first half forward, the second backward).
  void ring() {
    const int n = a_.n(), steps = n / 2;
    auto& s = w_.sregs();
    const int bytes = s.take(), address = s.take();
    for (int k = 1; k <= steps; ++k) {
      if (k >= 2) wait_both();
      const bool halves = n % 2 == 0 && k == steps;
      a_.block_address(address, -(k - 1));
      w_.line("smov s{}, s{}", bytes, a_.block());
      if (halves) w_.line("sshri s{}, s{}, 1", bytes, bytes);
      send(true, address, bytes);
      a_.block_address(address, k - 1);
      if (halves) {
        w_.line("sadd s{}, s{}, s{}", address, address, bytes);  // the second half starts after the first
        w_.line("ssub s{}, s{}, s{}", bytes, a_.block(), bytes);
      }
      send(false, address, bytes);
    }
    wait_both();
    s.release(bytes);
    s.release(address);
  }

 private:
  void send(bool forward, int address, int bytes) {
    w_.line("dma.remote dq{}, sem{}, sem{}, s{}, s{}, s{}, s{}", forward ? kForwardQueue : kBackwardQueue, kSent,
            forward ? kFromPrevious : kFromNext, forward ? a_.next() : a_.previous(), address, address, bytes);
    w_.line("saddi s{}, s{}, 1", sent_, sent_);
  }
  // What step k delivered on a line: from behind while the block's origin exists, and from ahead.
  void wait_line_step(int k) {
    a_.if_on_axis(-k, [&] { w_.line("sem.wait sem{}, 1", kFromPrevious); });
    a_.if_on_axis(k, [&] { w_.line("sem.wait sem{}, 1", kFromNext); });
  }
  void wait_both() {
    w_.line("sem.wait sem{}, 1", kFromPrevious);
    w_.line("sem.wait sem{}, 1", kFromNext);
  }

  AsmWriter& w_;
  CollectiveAxis& a_;
  int sent_;
};

}  // namespace

void emit_all_gather(AsmWriter& w, const SliceShape& slice, int rank, int out, int chunk, int sent) {
  CollectiveAxis axis(w, rank, out, chunk);
  int stride = 1;
  for (size_t i = slice.axes.size(); i-- > 0;) {  // last axis first: blocks grow contiguously
    const int n = slice.axes[i];
    if (n > 1) {
      axis.begin(n, stride);
      AllGatherAxis gather(w, axis, sent);
      if (slice.wraps[i] && n > 2) gather.ring();
      else gather.line();
    }
    stride *= n;
  }
}

isa::Program make_all_gather(const SliceShape& slice, const sim::ChipConfig& chip) {
  (void)chip;
  check_slice_shape(slice, "all_gather");
  AsmWriter w("all_gather");
  const int out_arg = w.argument("out", isa::ArgumentKind::Buffer);
  const int chunk_arg = w.argument("chunk_bytes", isa::ArgumentKind::Scalar);
  auto& s = w.sregs();
  const int rank = s.take(), out = s.take(), chunk = s.take(), sent = s.take();
  w.line("schip s{}", rank);
  w.line("sarg s{}, {}", out, out_arg);
  w.line("sarg s{}, {}", chunk, chunk_arg);
  w.line("sli s{}, 0", sent);
  emit_all_gather(w, slice, rank, out, chunk, sent);
  CollectiveAxis::drain_sends(w, sent);
  return w.assemble();
}

}  // namespace vtpu::kernels
