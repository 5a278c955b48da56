// The broadcast from chip 0, axis by axis (axis 0 first, among the chips whose later coordinates
// are 0, then each later axis from every chip that has the data): along a line the data flows
// from coordinate 0 to the far end, round a ring both ways to the chip opposite. Each chip
// forwards a piece as soon as it lands, so a chain of n chips costs the data over one link plus a
// piece and a hop per further chip, not n times the data.
#include <fmt/format.h>

#include <functional>

#include "kernels/codegen/asm_writer.h"
#include "kernels/generators/collective_axis.h"
#include "kernels/generators/collectives.h"

namespace vtpu::kernels {
namespace {

constexpr int64_t kPieceBytes = 64 * 1024, kMinPieceBytes = 4096;

class BroadcastAxis {
 public:
  BroadcastAxis(AsmWriter& w, CollectiveAxis& axis, int data, int bytes, int sent)
      : w_(w), a_(axis), data_(data), bytes_(bytes), sent_(sent) {}

  // Coordinate 0 sends forward (and, on a ring, backward); a chip on the way receives each piece
  // from where it came and passes it on while the chip after it still needs it.
  void run(bool ring) {
    const int n = a_.n();
    // on a ring, forward covers coordinates 1 .. n / 2, backward n - 1 down to n / 2 + 1
    const int forward_last = ring ? n / 2 : n - 1;
    auto& s = w_.sregs();
    const int receive_forward = s.take(), receive_backward = s.take(), send_forward = s.take(),
              send_backward = s.take();
    flag(receive_forward, 1, forward_last);
    flag(send_forward, 0, forward_last - 1);
    flag(receive_backward, forward_last + 1, ring ? n - 1 : 0);
    flag(send_backward, forward_last + 2, ring ? n : 0);  // coordinate n is the root, 0
    pieces(receive_forward, receive_backward, send_forward, send_backward);
    for (int r : {receive_forward, receive_backward, send_forward, send_backward}) s.release(r);
  }

 private:
  // s`flag` = 1 when first <= coordinate <= last, coordinate 0 also standing for n.
  void flag(int flag, int first, int last) {
    const int c = w_.sregs().take();
    w_.line("sli s{}, 0", flag);
    for (int at = first; at <= last; ++at) {
      const std::string skip = w_.new_label("other_coordinate");
      w_.line("sli s{}, {}", c, at % a_.n());
      w_.line("bne s{}, s{}, {}", a_.coord(), c, skip);
      w_.line("sli s{}, 1", flag);
      w_.place(skip);
    }
    w_.sregs().release(c);
  }

  void pieces(int receive_forward, int receive_backward, int send_forward, int send_backward) {
    auto& s = w_.sregs();
    const int at = s.take(), end = s.take(), bytes = s.take(), limit = s.take(), zero = s.take();
    w_.line("smov s{}, s{}", at, data_);
    w_.line("sadd s{}, s{}, s{}", end, data_, bytes_);
    // pieces of a sixteenth of the data, 4 to 64 KiB: short enough that a chain of chips keeps
    // every link busy even when the data is small
    w_.line("sshri s{}, s{}, 4", limit, bytes_);
    w_.load_immediate(bytes, kMinPieceBytes);
    w_.line("smax s{}, s{}, s{}", limit, limit, bytes);
    w_.load_immediate(bytes, kPieceBytes);
    w_.line("smin s{}, s{}, s{}", limit, limit, bytes);
    w_.line("sli s{}, 0", zero);
    const std::string loop = w_.new_label("piece"), done = w_.new_label("pieces_done");
    w_.place(loop);
    w_.line("bge s{}, s{}, {}", at, end, done);
    w_.line("ssub s{}, s{}, s{}", bytes, end, at);
    w_.line("smin s{}, s{}, s{}", bytes, bytes, limit);
    const auto when = [&](int flag, const std::function<void()>& body) {
      const std::string skip = w_.new_label("skip");
      w_.line("beq s{}, s{}, {}", flag, zero, skip);
      body();
      w_.place(skip);
    };
    when(receive_forward, [&] { w_.line("sem.wait sem{}, 1", kFromPrevious); });
    when(receive_backward, [&] { w_.line("sem.wait sem{}, 1", kFromNext); });
    for (bool forward : {true, false}) {
      when(forward ? send_forward : send_backward, [&] {
        w_.line("dma.remote dq{}, sem{}, sem{}, s{}, s{}, s{}, s{}", forward ? kForwardQueue : kBackwardQueue, kSent,
                forward ? kFromPrevious : kFromNext, forward ? a_.next() : a_.previous(), at, at, bytes);
        w_.line("saddi s{}, s{}, 1", sent_, sent_);
      });
    }
    w_.line("sadd s{}, s{}, s{}", at, at, bytes);
    w_.line("jmp {}", loop);
    w_.place(done);
    for (int r : {at, end, bytes, limit, zero}) s.release(r);
  }

  AsmWriter& w_;
  CollectiveAxis& a_;
  int data_, bytes_, sent_;
};

}  // namespace

isa::Program make_broadcast(const SliceShape& slice, const sim::ChipConfig& chip) {
  (void)chip;
  check_slice_shape(slice, "broadcast");
  AsmWriter w("broadcast");
  const int data_arg = w.argument("data", isa::ArgumentKind::Buffer);
  const int bytes_arg = w.argument("bytes", isa::ArgumentKind::Scalar);
  auto& s = w.sregs();
  const int rank = s.take(), data = s.take(), bytes = s.take(), sent = s.take(), later = s.take(), zero = s.take();
  w.line("schip s{}", rank);
  w.line("sarg s{}, {}", data, data_arg);
  w.line("sarg s{}, {}", bytes, bytes_arg);
  w.line("sli s{}, 0", sent);
  w.line("sli s{}, 0", zero);
  {
    CollectiveAxis axis(w, rank, data, bytes);
    int stride = 1;
    for (int n : slice.axes) stride *= n;
    for (size_t i = 0; i < slice.axes.size(); ++i) {
      const int n = slice.axes[i];
      stride /= n;
      if (n <= 1) continue;
      // this axis' phase runs on the chips whose later coordinates are all 0: rank % stride == 0
      const std::string skip = w.new_label("not_in_phase");
      w.line("sli s{}, {}", later, stride);
      w.line("srem s{}, s{}, s{}", later, rank, later);
      w.line("bne s{}, s{}, {}", later, zero, skip);
      axis.begin(n, stride);
      BroadcastAxis(w, axis, data, bytes, sent).run(slice.wraps[i] && n > 2);
      w.place(skip);
    }
  }
  CollectiveAxis::drain_sends(w, sent);
  return w.assemble();
}

}  // namespace vtpu::kernels
