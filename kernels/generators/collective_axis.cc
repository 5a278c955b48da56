#include "kernels/generators/collective_axis.h"

#include <fmt/format.h>

#include <algorithm>

#include "kernels/codegen/kernel_error.h"

namespace vtpu::kernels {

void check_slice_shape(const SliceShape& slice, const char* what) {
  bool ok = !slice.axes.empty() && slice.axes.size() <= 3 && slice.wraps.size() == slice.axes.size();
  for (int n : slice.axes) ok = ok && n >= 1;
  if (!ok) throw KernelError(fmt::format("{}: a slice is one to three axes of at least one chip", what));
}

void wait_for_signals(AsmWriter& w, int sem, int count) {
  for (; count > 0; count -= 255) w.line("sem.wait sem{}, {}", sem, std::min(count, 255));
}

std::vector<int> nearest_first(int chips) {
  std::vector<int> offsets;
  for (int k = 1; int(offsets.size()) < chips - 1; ++k) {
    offsets.push_back(k);
    if (int(offsets.size()) < chips - 1) offsets.push_back(chips - k);
  }
  return offsets;
}

CollectiveAxis::CollectiveAxis(AsmWriter& w, int rank, int out, int chunk) : w_(w), rank_(rank), out_(out), chunk_(chunk) {
  auto& s = w_.sregs();
  coord_ = s.take(), base_ = s.take(), block_ = s.take(), next_ = s.take(), previous_ = s.take(), extent_ = s.take();
  scratch_ = s.take(), zero_ = s.take();
}

CollectiveAxis::~CollectiveAxis() {
  for (int r : {coord_, base_, block_, next_, previous_, extent_, scratch_, zero_}) w_.sregs().release(r);
}

void CollectiveAxis::begin(int n, int stride) {
  n_ = n;
  const int t = scratch_;
  w_.line("sli s{}, 0", zero_);
  w_.line("sli s{}, {}", t, stride);
  w_.line("sdiv s{}, s{}, s{}", base_, rank_, t);  // this chip's block index, for now
  w_.line("sli s{}, {}", extent_, n);
  w_.line("srem s{}, s{}, s{}", coord_, base_, extent_);
  w_.line("smuli s{}, s{}, {}", block_, chunk_, stride);
  w_.line("ssub s{}, s{}, s{}", base_, base_, coord_);
  w_.line("smul s{}, s{}, s{}", base_, base_, block_);
  w_.line("sadd s{}, s{}, s{}", base_, base_, out_);
  // neighbours, wrapping round the axis: rank +- stride, or -+ (n - 1) * stride at the ends
  for (const auto& [dst, step] : {std::pair{next_, 1}, std::pair{previous_, n - 1}}) {
    w_.line("saddi s{}, s{}, {}", t, coord_, step);
    w_.line("srem s{}, s{}, s{}", t, t, extent_);
    w_.line("ssub s{}, s{}, s{}", t, t, coord_);
    w_.line("smuli s{}, s{}, {}", t, t, stride);
    w_.line("sadd s{}, s{}, s{}", dst, rank_, t);
  }
}

void CollectiveAxis::block_address(int dst, int offset) {
  w_.line("saddi s{}, s{}, {}", dst, coord_, ((offset % n_) + n_) % n_);
  w_.line("srem s{}, s{}, s{}", dst, dst, extent_);
  w_.line("smul s{}, s{}, s{}", dst, dst, block_);
  w_.line("sadd s{}, s{}, s{}", dst, dst, base_);
}

void CollectiveAxis::if_on_axis(int offset, const std::function<void()>& body) {
  const std::string skip = w_.new_label("off_axis");
  w_.line("saddi s{}, s{}, {}", scratch_, coord_, offset);
  w_.line("blt s{}, s{}, {}", scratch_, zero_, skip);
  w_.line("bge s{}, s{}, {}", scratch_, extent_, skip);
  body();
  w_.place(skip);
}

void CollectiveAxis::drain_sends(AsmWriter& w, int sent) {
  const std::string drained = w.new_label("sends_landed"), drain = w.new_label("drain_sends");
  const int zero = w.sregs().take();
  w.line("sli s{}, 0", zero);
  w.place(drain);
  w.line("bge s{}, s{}, {}", zero, sent, drained);
  w.line("sem.wait sem{}, 1", kSent);
  w.line("saddi s{}, s{}, -1", sent, sent);
  w.line("jmp {}", drain);
  w.place(drained);
  w.sregs().release(zero);
}

}  // namespace vtpu::kernels
