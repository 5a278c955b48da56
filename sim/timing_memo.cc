#include "sim/timing_memo.h"

namespace vtpu::sim {

TimingMemo::Key TimingMemo::key(int cores, std::span<const KernelArg> args, const Hbm* held) {
  Key key{cores};
  key.reserve(1 + 2 * args.size());
  for (const auto& a : args) {
    if (a.kind == KernelArg::Kind::Buffer) {
      key.push_back(static_cast<int64_t>(a.bytes));
      key.push_back(held && held->contains(a.address) ? 1 : 0);
    } else {
      key.push_back(a.scalar);
      key.push_back(2);  // marks a scalar, so (bytes, memory) and (value) pairs never collide
    }
  }
  return key;
}

std::optional<LaunchResult> TimingMemo::find(const Key& key) const {
  const auto it = results_.find(key);
  if (it == results_.end()) return std::nullopt;
  return it->second;
}

void TimingMemo::remember(Key key, const LaunchResult& result) {
  if (results_.size() >= kMaxEntries) results_.clear();
  results_.insert_or_assign(std::move(key), result);
}

}  // namespace vtpu::sim
