// Semaphores: sem0 counts pieces landed from the previous chip along the axis, sem1 from the next
// one, sem2 this chip's sends (all waited for before the kernel ends). Queue dq0 sends forward,
// dq1 backward, so the two directions' DMAs do not queue behind each other.
#include "kernels/generators/collectives.h"

#include <fmt/format.h>

#include <functional>

#include "kernels/codegen/asm_writer.h"
#include "kernels/codegen/kernel_error.h"

namespace vtpu::kernels {
namespace {

constexpr int kFromPrevious = 0, kFromNext = 1, kSent = 2;
constexpr int kForwardQueue = 0, kBackwardQueue = 1;

void check_shape(const SliceShape& slice, const char* what) {
  bool ok = !slice.axes.empty() && slice.axes.size() <= 3 && slice.wraps.size() == slice.axes.size();
  for (int n : slice.axes) ok = ok && n >= 1;
  if (!ok) throw KernelError(fmt::format("{}: a slice is one to three axes of at least one chip", what));
}

// Registers of one axis' phase, set at run time from the chip's rank.
struct AxisRegs {
  int coord;     // this chip's coordinate along the axis
  int base;      // address of coordinate 0's block in `out`
  int block;     // bytes per block: the chunk times the chips of the later axes
  int next;      // chip index one step forward along the axis (wrapping)
  int previous;  // one step back
  int extent;    // the axis' size, for comparisons
};

class AllGatherWriter {
 public:
  AllGatherWriter(AsmWriter& w, int rank, int out, int chunk, int sent) : w_(w), rank_(rank), out_(out), chunk_(chunk), sent_(sent) {}

  void axis(int n, int stride, bool ring) {
    auto& s = w_.sregs();
    const AxisRegs a{s.take(), s.take(), s.take(), s.take(), s.take(), s.take()};
    t_ = s.take();
    u_ = s.take();
    set_up(a, n, stride);
    if (ring) gather_ring(a, n);
    else gather_line(a, n);
    for (int r : {a.coord, a.base, a.block, a.next, a.previous, a.extent, t_, u_}) s.release(r);
  }

 private:
  void set_up(const AxisRegs& a, int n, int stride) {
    w_.line("sli s{}, {}", t_, stride);
    w_.line("sdiv s{}, s{}, s{}", u_, rank_, t_);  // this chip's block index
    w_.line("sli s{}, {}", a.extent, n);
    w_.line("srem s{}, s{}, s{}", a.coord, u_, a.extent);
    w_.line("smuli s{}, s{}, {}", a.block, chunk_, stride);
    w_.line("ssub s{}, s{}, s{}", t_, u_, a.coord);
    w_.line("smul s{}, s{}, s{}", t_, t_, a.block);
    w_.line("sadd s{}, s{}, s{}", a.base, out_, t_);
    // neighbours, wrapping round the axis: rank +- stride, or -+ (n - 1) * stride at the ends
    w_.line("saddi s{}, s{}, 1", t_, a.coord);
    w_.line("srem s{}, s{}, s{}", t_, t_, a.extent);
    w_.line("ssub s{}, s{}, s{}", t_, t_, a.coord);
    w_.line("smuli s{}, s{}, {}", t_, t_, stride);
    w_.line("sadd s{}, s{}, s{}", a.next, rank_, t_);
    w_.line("saddi s{}, s{}, {}", t_, a.coord, n - 1);
    w_.line("srem s{}, s{}, s{}", t_, t_, a.extent);
    w_.line("ssub s{}, s{}, s{}", t_, t_, a.coord);
    w_.line("smuli s{}, s{}, {}", t_, t_, stride);
    w_.line("sadd s{}, s{}, s{}", a.previous, rank_, t_);
  }

  // s`u_` = address of the block that started `offset` steps away (coordinate + offset, mod n).
  void block_address(const AxisRegs& a, int offset, int n) {
    w_.line("saddi s{}, s{}, {}", u_, a.coord, ((offset % n) + n) % n);
    w_.line("srem s{}, s{}, s{}", u_, u_, a.extent);
    w_.line("smul s{}, s{}, s{}", u_, u_, a.block);
    w_.line("sadd s{}, s{}, s{}", u_, u_, a.base);
  }

  void send(bool forward, const AxisRegs& a, int address, int bytes) {
    w_.line("dma.remote dq{}, sem{}, sem{}, s{}, s{}, s{}, s{}", forward ? kForwardQueue : kBackwardQueue, kSent,
            forward ? kFromPrevious : kFromNext, forward ? a.next : a.previous, address, address, bytes);
    w_.line("saddi s{}, s{}, 1", sent_, sent_);
  }

  // Runs `body` only when coordinate + offset lies on the axis (0 <= it < n).
  void if_on_axis(const AxisRegs& a, int offset, const std::function<void()>& body) {
    const std::string skip = w_.new_label("off_axis");
    w_.line("saddi s{}, s{}, {}", t_, a.coord, offset);
    w_.line("sli s{}, 0", u_);
    w_.line("blt s{}, s{}, {}", t_, u_, skip);
    w_.line("bge s{}, s{}, {}", t_, a.extent, skip);
    body();
    w_.place(skip);
  }

  // Step k sends forward the block from k - 1 chips back and backward the one from k - 1 ahead,
  // each only while it has somewhere to go; it first waits for what step k - 1 delivered.
  void gather_line(const AxisRegs& a, int n) {
    const int bytes = t_;
    for (int k = 1; k < n; ++k) {
      if (k >= 2) {
        if_on_axis(a, -(k - 1), [&] { w_.line("sem.wait sem{}, 1", kFromPrevious); });
        if_on_axis(a, k - 1, [&] { w_.line("sem.wait sem{}, 1", kFromNext); });
      }
      for (bool forward : {true, false}) {
        if_on_axis(a, forward ? -(k - 1) : k - 1, [&] {
          if_on_axis(a, forward ? 1 : -1, [&] {
            block_address(a, forward ? -(k - 1) : k - 1, n);
            w_.line("smov s{}, s{}", bytes, a.block);
            send(forward, a, u_, bytes);
          });
        });
      }
    }
    if_on_axis(a, -(n - 1), [&] { w_.line("sem.wait sem{}, 1", kFromPrevious); });
    if_on_axis(a, n - 1, [&] { w_.line("sem.wait sem{}, 1", kFromNext); });
  }

  // Every chip sends both ways at every step; with n even, the block opposite goes half each way
  // at the last step (the first half forward, the second backward).
  void gather_ring(const AxisRegs& a, int n) {
    const int steps = n / 2;
    auto& s = w_.sregs();
    const int bytes = s.take(), address = s.take();
    for (int k = 1; k <= steps; ++k) {
      if (k >= 2) {
        w_.line("sem.wait sem{}, 1", kFromPrevious);
        w_.line("sem.wait sem{}, 1", kFromNext);
      }
      const bool halves = n % 2 == 0 && k == steps;
      block_address(a, -(k - 1), n);
      w_.line("smov s{}, s{}", bytes, a.block);
      if (halves) w_.line("sshri s{}, s{}, 1", bytes, bytes);
      w_.line("smov s{}, s{}", address, u_);
      send(true, a, address, bytes);
      block_address(a, k - 1, n);
      if (halves) {
        w_.line("sadd s{}, s{}, s{}", u_, u_, bytes);     // the second half starts after the first
        w_.line("ssub s{}, s{}, s{}", bytes, a.block, bytes);
      }
      send(false, a, u_, bytes);
    }
    w_.line("sem.wait sem{}, 1", kFromPrevious);
    w_.line("sem.wait sem{}, 1", kFromNext);
    s.release(bytes);
    s.release(address);
  }

  AsmWriter& w_;
  int rank_, out_, chunk_, sent_;
  int t_ = -1, u_ = -1;
};

}  // namespace

isa::Program make_all_gather(const SliceShape& slice, const sim::ChipConfig& chip) {
  (void)chip;
  check_shape(slice, "all_gather");
  AsmWriter w("all_gather");
  const int out_arg = w.argument("out", isa::ArgumentKind::Buffer);
  const int chunk_arg = w.argument("chunk_bytes", isa::ArgumentKind::Scalar);
  auto& s = w.sregs();
  const int rank = s.take(), out = s.take(), chunk = s.take(), sent = s.take();
  w.line("schip s{}", rank);
  w.line("sarg s{}, {}", out, out_arg);
  w.line("sarg s{}, {}", chunk, chunk_arg);
  w.line("sli s{}, 0", sent);
  AllGatherWriter gather(w, rank, out, chunk, sent);
  int stride = 1;
  for (size_t i = slice.axes.size(); i-- > 0;) {  // last axis first: blocks grow contiguously
    const int n = slice.axes[i];
    if (n > 1) gather.axis(n, stride, slice.wraps[i] && n > 2);
    stride *= n;
  }
  // every send has landed before the kernel ends
  const std::string drained = w.new_label("sends_landed"), drain = w.new_label("drain_sends");
  const int zero = s.take();
  w.line("sli s{}, 0", zero);
  w.place(drain);
  w.line("bge s{}, s{}, {}", zero, sent, drained);
  w.line("sem.wait sem{}, 1", kSent);
  w.line("saddi s{}, s{}, -1", sent, sent);
  w.line("jmp {}", drain);
  w.place(drained);
  return w.assemble();
}

}  // namespace vtpu::kernels
