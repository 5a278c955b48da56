// What every collective kernel does per torus axis, shared by all-gather and reduce-scatter: find
// this chip's coordinate and neighbours along the axis at run time (the program is the same on
// every chip), address the blocks of the axis' group, and branch on where a coordinate lies.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "kernels/codegen/asm_writer.h"
#include "kernels/generators/slice_shape.h"

namespace vtpu::kernels {

// Semaphores and queues every collective uses: pieces landed from the previous chip along the
// axis, from the next one, and this chip's sends (all waited for before the kernel ends); sends
// forward and backward on their own queues, so the two directions do not queue behind each other.
inline constexpr int kFromPrevious = 0, kFromNext = 1, kSent = 2;
inline constexpr int kForwardQueue = 0, kBackwardQueue = 1;

void check_slice_shape(const SliceShape& slice, const char* what);

// Emits sem.wait on `sem` for `count` signals (known when generating), in waits of at most 255,
// the most one sem.wait takes.
void wait_for_signals(AsmWriter& w, int sem, int count);

// Offsets to the other chips of a slice of `chips`, nearest first on alternating sides: 1, -1, 2,
// -2, ... (mod chips), so a chip's first direct sends go out on different links.
std::vector<int> nearest_first(int chips);

class CollectiveAxis {
 public:
  // rank, out, chunk: registers holding this chip's index, the data buffer and the chunk bytes.
  CollectiveAxis(AsmWriter& w, int rank, int out, int chunk);
  CollectiveAxis(const CollectiveAxis&) = delete;
  ~CollectiveAxis();

  // Sets the registers below for an axis of `n` chips whose neighbours are `stride` ranks apart
  // (the product of the later axes): its group's blocks are then `stride` chunks each.
  void begin(int n, int stride);
  int n() const { return n_; }
  int coord() const { return coord_; }  // this chip's coordinate
  int block() const { return block_; }  // bytes per block
  int next() const { return next_; }   // the chip one step forward (wrapping)
  int previous() const { return previous_; }
  // s`dst` = address of the block of coordinate + offset (mod n); clobbers nothing else.
  void block_address(int dst, int offset);
  // Runs `body` only where coordinate + offset lies on the axis (0 <= it < n), a line's ends.
  void if_on_axis(int offset, const std::function<void()>& body);
  // Emits the drain of `sent` sends: sem.wait on kSent until they have all landed.
  static void drain_sends(AsmWriter& w, int sent);

 private:
  AsmWriter& w_;
  int rank_, out_, chunk_;
  int n_ = 0;
  int coord_, base_, block_, next_, previous_, extent_, scratch_, zero_;
};

}  // namespace vtpu::kernels
