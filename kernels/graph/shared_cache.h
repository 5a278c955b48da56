// A thread-safe map from a string key to an immutable, shared value that is built on the first
// request (outside the lock) and reused after, with hit/miss counters. Programs and whole plans
// are cached this way. A capacity, when given, bounds the entries: a workload with ever-new keys
// (new shapes) empties the cache instead of growing it without bound.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace vtpu::kernels {

template <typename T>
class SharedCache {
 public:
  explicit SharedCache(size_t capacity = 0) : capacity_(capacity) {}

  std::shared_ptr<const T> get_or_build(const std::string& key, const std::function<T()>& build, bool* hit = nullptr) {
    {
      std::lock_guard lock(mutex_);
      if (auto it = values_.find(key); it != values_.end()) {
        ++hits_;
        if (hit) *hit = true;
        return it->second;
      }
    }
    auto value = std::make_shared<const T>(build());  // built outside the lock
    std::lock_guard lock(mutex_);
    ++misses_;
    if (hit) *hit = false;
    if (capacity_ > 0 && values_.size() >= capacity_) values_.clear();
    return values_.emplace(key, std::move(value)).first->second;
  }

  uint64_t hits() const {
    std::lock_guard lock(mutex_);
    return hits_;
  }
  uint64_t misses() const {
    std::lock_guard lock(mutex_);
    return misses_;
  }
  size_t size() const {
    std::lock_guard lock(mutex_);
    return values_.size();
  }
  std::vector<std::string> keys() const {
    std::lock_guard lock(mutex_);
    std::vector<std::string> out;
    for (const auto& [key, value] : values_) out.push_back(key);
    std::sort(out.begin(), out.end());
    return out;
  }
  void clear() {
    std::lock_guard lock(mutex_);
    values_.clear();
    hits_ = misses_ = 0;
  }

 private:
  size_t capacity_;  // 0: unbounded
  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<const T>> values_;
  uint64_t hits_ = 0, misses_ = 0;
};

}  // namespace vtpu::kernels
