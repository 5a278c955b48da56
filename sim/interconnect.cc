#include "sim/interconnect.h"

#include <fmt/format.h>

#include <cstdlib>
#include <numeric>
#include <stdexcept>

namespace vtpu::sim {

Slice::Slice(const ChipConfig& chip, std::vector<int> axes)
    : axes_(std::move(axes)), link_bandwidth_(chip.ici_link_bandwidth_bytes_per_s), hop_latency_(chip.ici_hop_latency_ns * 1e-9) {
  if (axes_.empty() || axes_.size() > 3) throw std::invalid_argument("vtpu: a slice has one to three axes");
  for (int n : axes_) {
    if (n < 1) throw std::invalid_argument("vtpu: every axis of a slice has at least one chip");
  }
  const bool three_d = chip.ici_links >= 6;
  bool whole_cubes = axes_.size() == 3;
  for (int n : axes_) whole_cubes = whole_cubes && n % 4 == 0;
  for (int n : axes_) wraps_.push_back(three_d ? whole_cubes : n == 16);
}

int Slice::size() const { return std::accumulate(axes_.begin(), axes_.end(), 1, std::multiplies<>()); }

std::vector<int> Slice::coordinates(int rank) const {
  std::vector<int> out(axes_.size());
  for (size_t i = axes_.size(); i-- > 0;) {
    out[i] = rank % axes_[i];
    rank /= axes_[i];
  }
  return out;
}

int Slice::hops(int n, bool wraps) const { return wraps && n > 2 ? n / 2 : n - 1; }

double Slice::axis_gather(int n, bool wraps, double bytes) const {
  if (n <= 1) return 0;
  const double share = double(n - 1) / n * bytes;
  if (wraps && n > 2) return hops(n, wraps) * hop_latency_ + share / (2 * link_bandwidth_);  // both directions
  return hops(n, wraps) * hop_latency_ + share / link_bandwidth_;
}

double Slice::all_gather(double output_bytes) const {
  double seconds = 0, data = output_bytes / size();
  for (size_t i = axes_.size(); i-- > 0;) {  // grows back, last axis first
    data *= axes_[i];
    seconds += axis_gather(axes_[i], wraps_[i], data);
  }
  return seconds;
}

double Slice::reduce_scatter(double input_bytes) const {
  double seconds = 0, data = input_bytes;
  for (size_t i = 0; i < axes_.size(); ++i) {
    seconds += axis_gather(axes_[i], wraps_[i], data);
    data /= axes_[i];
  }
  return seconds;
}

double Slice::all_reduce(double bytes) const { return reduce_scatter(bytes) + all_gather(bytes); }

double Slice::broadcast(double bytes) const {
  double seconds = 0;
  for (size_t i = 0; i < axes_.size(); ++i) {
    if (axes_[i] > 1) seconds += hops(axes_[i], wraps_[i]) * hop_latency_ + bytes / link_bandwidth_;
  }
  return seconds;
}

double Slice::all_to_all(double input_bytes) const {
  double seconds = 0;
  for (size_t i = 0; i < axes_.size(); ++i) {
    const int n = axes_[i];
    if (n <= 1) continue;
    const double width = wraps_[i] && n > 2 ? 2 * link_bandwidth_ : link_bandwidth_;
    seconds += hops(n, wraps_[i]) * hop_latency_ + input_bytes * n / (4 * width);
  }
  return seconds;
}

double Slice::point_to_point(int src, int dst, double bytes) const {
  if (src == dst) return 0;
  const auto a = coordinates(src), b = coordinates(dst);
  int distance = 0;
  for (size_t i = 0; i < axes_.size(); ++i) {
    const int d = std::abs(a[i] - b[i]);
    distance += wraps_[i] && axes_[i] > 2 ? std::min(d, axes_[i] - d) : d;
  }
  return distance * hop_latency_ + bytes / link_bandwidth_;
}

std::vector<int> parse_topology(const std::string& text) {
  std::vector<int> axes;
  size_t at = 0;
  bool ok = !text.empty();
  while (ok && at <= text.size()) {
    const size_t x = text.find_first_of("xX", at);
    const std::string part = text.substr(at, x == std::string::npos ? std::string::npos : x - at);
    ok = !part.empty() && part.find_first_not_of("0123456789") == std::string::npos && part.size() < 6;
    if (ok) axes.push_back(std::stoi(part));
    if (x == std::string::npos) break;
    at = x + 1;
  }
  ok = ok && !axes.empty() && axes.size() <= 3;
  for (int n : axes) ok = ok && n >= 1;
  if (!ok) {
    throw std::invalid_argument(
        fmt::format("vtpu: VTPU_TOPOLOGY='{}' is not a slice such as '4', '2x4' or '2x2x2' (1 to 3 axes)", text));
  }
  return axes;
}

}  // namespace vtpu::sim
