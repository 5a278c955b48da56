// The reduce-scatter and all-reduce. Partial sums flow toward each chunk's owner the way the
// all-gather's blocks flow away from it, in reverse: a chip adds its own share of a block to what
// arrived for that block from one side and sends the sum on to the other, a piece at a time, so
// the transfer of one piece overlaps the add of the next. On an even ring the block opposite
// starts half each way, so every block is handled in two halves there (the halves of a send and
// of the receiver's wait must match piece for piece).
#include <fmt/format.h>

#include <functional>
#include <optional>
#include <vector>

#include "kernels/codegen/asm_writer.h"
#include "kernels/codegen/trap_code.h"
#include "kernels/generators/collective_axis.h"
#include "kernels/generators/collectives.h"

namespace vtpu::kernels {
namespace {

constexpr int64_t kPieceBytes = 64 * 1024;  // long enough that adding one keeps pace with a link
constexpr int64_t kTileBytes = 4096;        // one vreg of f32
constexpr int64_t kChunkMultiple = 2 * kTileBytes;
constexpr int kLocalQueue = 2, kInboxQueue = 3, kLocalSem = 3;

struct Buffers {
  int data, from_previous, from_next;  // registers holding the three buffers' addresses
};

// One direction's share of a step: whether this chip sends (and first adds what arrived) as
// registers holding 0 or 1, set at run time on a line (whose ends do less) and once on a ring.
struct Flow {
  bool forward;
  int owner;  // the block sent is coordinate + owner's
  int send, add;
};

class ReduceScatterAxis {
 public:
  ReduceScatterAxis(AsmWriter& w, CollectiveAxis& axis, const Buffers& b, int sent, bool halves)
      : w_(w), a_(axis), b_(b), sent_(sent), halves_(halves) {}

  // A line's partial sums start at its far ends. Step k sends forward the sum for coordinate
  // + n - k and backward the one for coordinate + k - n, each only while that coordinate exists;
  // from step 2 on, a chip with a neighbour on the far side first adds what that one sent.
  void line() {
    const int n = a_.n();
    for (int k = 1; k < n; ++k) {
      with_flows(n - k, k - n, [&](Flow& f, Flow& b) {
        for (Flow* flow : {&f, &b}) {
          set_flag(flow->send, flow->owner, std::nullopt);
          if (k >= 2) set_flag(flow->add, flow->owner, flow->forward ? -1 : 1);
          else w_.line("sli s{}, 0", flow->add);
        }
        step(f, b, -1);
      });
    }
    own_block(true);
  }

  // Every chip sends both ways at every step: forward the sum for coordinate + K + 1 - k,
  // backward for coordinate + k - 1 - K (K = n / 2 steps), adding what arrived from step 2 on.
  // On an even ring step 1 sends the block opposite in halves (the second forward, the first
  // backward), so step 2 adds only to the half that came.
  void ring() {
    const int n = a_.n(), steps = n / 2;
    for (int k = 1; k <= steps; ++k) {
      with_flows(steps + 1 - k, k - 1 - steps, [&](Flow& f, Flow& b) {
        for (int segment : halves_ ? std::vector<int>{0, 1} : std::vector<int>{-1}) {
          // which flows send this segment, and add to it
          const bool f_sends = !(halves_ && k == 1 && segment == 0), b_sends = !(halves_ && k == 1 && segment == 1);
          const bool f_adds = k >= 2 && !(halves_ && k == 2 && segment == 0);
          const bool b_adds = k >= 2 && !(halves_ && k == 2 && segment == 1);
          w_.line("sli s{}, {}", f.send, int(f_sends));
          w_.line("sli s{}, {}", b.send, int(b_sends));
          w_.line("sli s{}, {}", f.add, int(f_adds));
          w_.line("sli s{}, {}", b.add, int(b_adds));
          step(f, b, segment);
        }
      });
    }
    own_block(false);
  }

 private:
  void with_flows(int forward_owner, int backward_owner, const std::function<void(Flow&, Flow&)>& body) {
    auto& s = w_.sregs();
    Flow f{true, forward_owner, s.take(), s.take()}, b{false, backward_owner, s.take(), s.take()};
    body(f, b);
    for (int r : {f.send, f.add, b.send, b.add}) s.release(r);
  }

  // s`flag` = 1 when coordinate + owner lies on the axis (and, given, coordinate + side too).
  void set_flag(int flag, int owner, std::optional<int> side) {
    w_.line("sli s{}, 0", flag);
    a_.if_on_axis(owner, [&] {
      if (side) a_.if_on_axis(*side, [&] { w_.line("sli s{}, 1", flag); });
      else w_.line("sli s{}, 1", flag);
    });
  }

  // The two flows of a step over one segment (-1: whole blocks), a piece of each in turn, so that
  // both directions' links stay busy.
  void step(const Flow& f, const Flow& b, int segment) {
    auto& s = w_.sregs();
    const int f_base = s.take(), b_base = s.take(), length = s.take(), offset = s.take(), bytes = s.take(),
              limit = s.take(), zero = s.take();
    a_.block_address(f_base, f.owner);
    a_.block_address(b_base, b.owner);
    w_.line("smov s{}, s{}", length, a_.block());
    if (segment >= 0) w_.line("sshri s{}, s{}, 1", length, length);  // a half
    if (segment == 1) {
      w_.line("sadd s{}, s{}, s{}", f_base, f_base, length);
      w_.line("sadd s{}, s{}, s{}", b_base, b_base, length);
    }
    w_.line("sli s{}, 0", zero);
    w_.line("sli s{}, 0", offset);
    const std::string loop = w_.new_label("piece"), done = w_.new_label("pieces_done");
    w_.place(loop);
    w_.line("bge s{}, s{}, {}", offset, length, done);
    w_.line("ssub s{}, s{}, s{}", bytes, length, offset);
    w_.load_immediate(limit, kPieceBytes);
    w_.line("smin s{}, s{}, s{}", bytes, bytes, limit);
    // Both flows' adds at once, so their HBM round trips overlap: load, add, store, then send.
    const std::pair<const Flow*, int> flows[] = {{&f, f_base}, {&b, b_base}};
    const int work = s.take();
    for (const auto& [flow, base] : flows) w_.line("sadd s{}, s{}, s{}", base, base, offset);
    for (int phase = 0; phase < 3; ++phase) {
      for (int i = 0; i < 2; ++i) {
        const Flow& flow = *flows[i].first;
        const std::string skip = w_.new_label("no_add");
        w_.line("sand s{}, s{}, s{}", work, flow.send, flow.add);
        w_.line("beq s{}, s{}, {}", work, zero, skip);
        if (phase == 0) load_pieces(flows[i].second, bytes, flow.forward, i);
        else if (phase == 1) add_pieces(flows[i].second, bytes, i);
        else w_.line("sem.wait sem{}, 1", kLocalSem + i);  // the sum is back in HBM
        w_.place(skip);
      }
    }
    for (const auto& [flow, base] : flows) {
      const std::string skip = w_.new_label("no_send");
      w_.line("beq s{}, s{}, {}", flow->send, zero, skip);
      send_piece(base, bytes, flow->forward);
      w_.place(skip);
    }
    for (const auto& [flow, base] : flows) w_.line("ssub s{}, s{}, s{}", base, base, offset);
    s.release(work);
    w_.line("sadd s{}, s{}, s{}", offset, offset, bytes);
    w_.line("jmp {}", loop);
    w_.place(done);
    for (int r : {f_base, b_base, length, offset, bytes, limit, zero}) s.release(r);
  }

  void send_piece(int piece, int bytes, bool forward) {
    const int dst = w_.sregs().take();
    inbox_address(dst, piece, forward);
    w_.line("dma.remote dq{}, sem{}, sem{}, s{}, s{}, s{}, s{}", forward ? kForwardQueue : kBackwardQueue, kSent,
            forward ? kFromPrevious : kFromNext, forward ? a_.next() : a_.previous(), dst, piece, bytes);
    w_.line("saddi s{}, s{}, 1", sent_, sent_);
    w_.sregs().release(dst);
  }

  // The owner's last step: what arrived from each side (a line's ends have one) joins its block,
  // both sides in one pass as their pieces land, cut as the senders cut them (within each half on
  // an even ring).
  void own_block(bool line) {
    auto& s = w_.sregs();
    const int piece = s.take(), end = s.take(), bytes = s.take(), limit = s.take(), from_previous = s.take(),
              from_next = s.take();
    if (line) {
      set_flag(from_previous, -1, std::nullopt);
      set_flag(from_next, 1, std::nullopt);
    } else {
      w_.line("sli s{}, 1", from_previous);
      w_.line("sli s{}, 1", from_next);
    }
    for (int half = 0; half < (halves_ ? 2 : 1); ++half) {
      const std::string loop = w_.new_label("own_piece"), done = w_.new_label("own_done");
      a_.block_address(piece, 0);
      w_.line("smov s{}, s{}", bytes, a_.block());
      if (halves_) w_.line("sshri s{}, s{}, 1", bytes, bytes);
      if (half == 1) w_.line("sadd s{}, s{}, s{}", piece, piece, bytes);
      w_.line("sadd s{}, s{}, s{}", end, piece, bytes);
      w_.load_immediate(limit, kPieceBytes);
      w_.place(loop);
      w_.line("bge s{}, s{}, {}", piece, end, done);
      w_.line("ssub s{}, s{}, s{}", bytes, end, piece);
      w_.line("smin s{}, s{}, s{}", bytes, bytes, limit);
      own_piece(piece, bytes, from_previous, from_next);
      w_.line("sadd s{}, s{}, s{}", piece, piece, bytes);
      w_.line("jmp {}", loop);
      w_.place(done);
    }
    for (int r : {piece, end, bytes, limit, from_previous, from_next}) s.release(r);
  }

  // data[piece] += what arrived for it from each side whose flag register is 1.
  void own_piece(int piece, int bytes, int from_previous, int from_next) {
    auto& s = w_.sregs();
    const int vmem = s.take(), src = s.take(), one = s.take(), zero = s.take();
    w_.line("sli s{}, 1", one);
    w_.line("sli s{}, 0", zero);
    w_.line("sli s{}, 0", vmem);
    w_.line("dma.h2v dq{}, sem{}, s{}, s{}, s{}, s{}, s{}, s{}", kLocalQueue, kLocalSem, vmem, piece, one, bytes, bytes, bytes);
    for (int side = 0; side < 2; ++side) {  // start both sides' loads as their pieces land
      const std::string skip = w_.new_label("no_side");
      w_.line("beq s{}, s{}, {}", side == 0 ? from_previous : from_next, zero, skip);
      w_.line("sem.wait sem{}, 1", side == 0 ? kFromPrevious : kFromNext);
      inbox_address(src, piece, side == 0);
      w_.load_immediate(vmem, (side + 1) * kPieceBytes);
      w_.line("dma.h2v dq{}, sem{}, s{}, s{}, s{}, s{}, s{}, s{}", kInboxQueue, kLocalSem + 1 + side, vmem, src, one, bytes,
              bytes, bytes);
      w_.place(skip);
    }
    w_.line("sem.wait sem{}, 1", kLocalSem);
    for (int side = 0; side < 2; ++side) {
      const std::string skip = w_.new_label("no_side");
      w_.line("beq s{}, s{}, {}", side == 0 ? from_previous : from_next, zero, skip);
      w_.line("sem.wait sem{}, 1", kLocalSem + 1 + side);
      add_tiles(0, (side + 1) * kPieceBytes, bytes);
      w_.place(skip);
    }
    w_.line("sli s{}, 0", vmem);
    w_.line("dma.v2h dq{}, sem{}, s{}, s{}, s{}, s{}, s{}, s{}", kLocalQueue, kLocalSem, vmem, piece, one, bytes, bytes, bytes);
    w_.line("sem.wait sem{}, 1", kLocalSem);
    for (int r : {vmem, src, one, zero}) s.release(r);
  }

  // VMEM[own, own + bytes) += VMEM[other, other + bytes), a vreg tile at a time.
  void add_tiles(int64_t own_at, int64_t other_at, int bytes) {
    auto& s = w_.sregs();
    const int own = s.take(), other = s.take(), end = s.take();
    w_.load_immediate(own, own_at);
    w_.load_immediate(other, other_at);
    w_.line("sadd s{}, s{}, s{}", end, own, bytes);
    const std::string loop = w_.new_label("add_tile"), done = w_.new_label("added");
    w_.place(loop);
    w_.line("bge s{}, s{}, {}", own, end, done);
    w_.line("vld v1, m0, s{}, 0, 512", own);
    w_.line("vld v2, m0, s{}, 0, 512", other);
    w_.line("vadd v1, v1, v2");
    w_.line("vst v1, m0, s{}, 0, 512", own);
    w_.line("saddi s{}, s{}, {}", own, own, kTileBytes);
    w_.line("saddi s{}, s{}, {}", other, other, kTileBytes);
    w_.line("jmp {}", loop);
    w_.place(done);
    for (int r : {own, other, end}) s.release(r);
  }

  // s`dst` = the address in the inbox that pieces travelling `forward` land in.
  void inbox_address(int dst, int piece, bool forward) {
    w_.line("ssub s{}, s{}, s{}", dst, piece, b_.data);
    w_.line("sadd s{}, s{}, s{}", dst, dst, forward ? b_.from_previous : b_.from_next);
  }

  // VMEM of flow `slot` (0 forward, 1 backward): its own piece, then the piece that arrived.
  static int64_t own_vmem(int slot) { return slot * 2 * kPieceBytes; }
  static int64_t arrived_vmem(int slot) { return own_vmem(slot) + kPieceBytes; }

  // Starts loading data[piece] and, once it has landed (one signal), the piece that arrived
  // travelling `forward`; both signal kLocalSem + slot.
  void load_pieces(int piece, int bytes, bool forward, int slot) {
    auto& s = w_.sregs();
    const int src = s.take(), vmem = s.take(), one = s.take();
    w_.line("sli s{}, 1", one);
    w_.load_immediate(vmem, own_vmem(slot));
    w_.line("dma.h2v dq{}, sem{}, s{}, s{}, s{}, s{}, s{}, s{}", kLocalQueue, kLocalSem + slot, vmem, piece, one, bytes, bytes, bytes);
    w_.line("sem.wait sem{}, 1", forward ? kFromPrevious : kFromNext);
    inbox_address(src, piece, forward);
    w_.load_immediate(vmem, arrived_vmem(slot));
    w_.line("dma.h2v dq{}, sem{}, s{}, s{}, s{}, s{}, s{}, s{}", kInboxQueue, kLocalSem + slot, vmem, src, one, bytes, bytes, bytes);
    for (int r : {src, vmem, one}) s.release(r);
  }

  // Once both loads of `slot` have landed: adds them and stores the sum to data[piece]
  // (signalling kLocalSem + slot when it is back in HBM).
  void add_pieces(int piece, int bytes, int slot) {
    auto& s = w_.sregs();
    const int own = s.take(), one = s.take();
    w_.line("sem.wait sem{}, 2", kLocalSem + slot);
    add_tiles(own_vmem(slot), arrived_vmem(slot), bytes);
    w_.load_immediate(own, own_vmem(slot));
    w_.line("sli s{}, 1", one);
    w_.line("dma.v2h dq{}, sem{}, s{}, s{}, s{}, s{}, s{}, s{}", kLocalQueue, kLocalSem + slot, own, piece, one, bytes, bytes, bytes);
    s.release(own);
    s.release(one);
  }

  AsmWriter& w_;
  CollectiveAxis& a_;
  Buffers b_;
  int sent_;
  bool halves_;
};

isa::Program make_reducing(const SliceShape& slice, const char* name, bool then_gather) {
  check_slice_shape(slice, name);
  AsmWriter w(name);
  const int data_arg = w.argument("data", isa::ArgumentKind::Buffer);
  const int previous_arg = w.argument("from_previous", isa::ArgumentKind::Buffer);
  const int next_arg = w.argument("from_next", isa::ArgumentKind::Buffer);
  const int chunk_arg = w.argument("chunk_bytes", isa::ArgumentKind::Scalar);
  auto& s = w.sregs();
  const int rank = s.take(), chunk = s.take(), sent = s.take();
  const Buffers b{s.take(), s.take(), s.take()};
  w.line("schip s{}", rank);
  w.line("sarg s{}, {}", b.data, data_arg);
  w.line("sarg s{}, {}", b.from_previous, previous_arg);
  w.line("sarg s{}, {}", b.from_next, next_arg);
  w.line("sarg s{}, {}", chunk, chunk_arg);
  w.line("sli s{}, 0", sent);
  {  // whole tiles in every half of a chunk
    const int t = s.take(), zero = s.take();
    const std::string tiled = w.new_label("chunk_tiled");
    w.line("sli s{}, {}", t, kChunkMultiple);
    w.line("srem s{}, s{}, s{}", t, chunk, t);
    w.line("sli s{}, 0", zero);
    w.line("beq s{}, s{}, {}", t, zero, tiled);
    w.trap(TrapCode::ChunkNotTiled);
    w.place(tiled);
    s.release(t);
    s.release(zero);
  }
  {
    CollectiveAxis axis(w, rank, b.data, chunk);
    int stride = 1;
    for (int n : slice.axes) stride *= n;
    for (size_t i = 0; i < slice.axes.size(); ++i) {  // first axis first: the data shrinks by each in turn
      const int n = slice.axes[i];
      stride /= n;
      if (n <= 1) continue;
      axis.begin(n, stride);
      const bool ring = slice.wraps[i] && n > 2;
      ReduceScatterAxis reduce(w, axis, b, sent, ring && n % 2 == 0);
      if (ring) reduce.ring();
      else reduce.line();
    }
  }
  if (then_gather) emit_all_gather(w, slice, rank, b.data, chunk, sent);
  CollectiveAxis::drain_sends(w, sent);
  return w.assemble();
}

}  // namespace

isa::Program make_reduce_scatter(const SliceShape& slice, const sim::ChipConfig& chip) {
  (void)chip;
  return make_reducing(slice, "reduce_scatter", false);
}

isa::Program make_all_reduce(const SliceShape& slice, const sim::ChipConfig& chip) {
  (void)chip;
  return make_reducing(slice, "all_reduce", true);
}

}  // namespace vtpu::kernels
