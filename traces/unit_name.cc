#include "traces/unit_name.h"

#include <mutex>
#include <set>
#include <string>

namespace vtpu::traces {

std::string_view unit_name(std::string_view name) {
  static std::mutex mutex;
  static std::set<std::string, std::less<>> names;  // nodes never move: views into them stay valid
  std::lock_guard lock(mutex);
  auto it = names.find(name);
  if (it == names.end()) it = names.emplace(name).first;
  return *it;
}

}  // namespace vtpu::traces
