// Sends, scatters and gathers (kernels/generators/rooted_sends.cc) run on a slice launch: the data
// lands where torch.distributed puts it and nowhere else, a send takes the torus' point-to-point
// closed form (sim::Slice), and a scatter or gather takes what the root's busiest link carries,
// plus at most the hops of the longest route.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <string>

#include "kernels/generators/collectives.h"
#include "sim/ici_links.h"
#include "sim/interconnect.h"
#include "support/run_slice.h"

using namespace vtpu;
using testing::Arg;
using testing::HostBuffer;

namespace {

kernels::SliceShape shape_of(const sim::Slice& slice) { return {slice.axes(), slice.wraps()}; }

struct SliceCase {
  const char* chip;
  const char* topology;
};
// Lines, a ring, 2-D and 3-D slices, and a 3-D torus that wraps (v4's whole cubes).
constexpr SliceCase kSlices[] = {{"v4", "4"}, {"v5e", "8"}, {"v5e", "16"}, {"v5e", "2x4"}, {"v4", "2x2x2"}, {"v4", "4x4x4"}};

// Bytes the busiest of the root's links carries in a scatter from `root` (or a gather to it, the
// routes reversed) of `chunk` bytes per chip, and the longest route's hops.
std::pair<double, int> root_link_load(const sim::ChipConfig& chip, const sim::Slice& slice, int root, double chunk,
                                      bool scatter) {
  const sim::IciLinks links(chip, slice);
  std::map<int, double> load;
  int most_hops = 0;
  for (int j = 0; j < slice.size(); ++j) {
    if (j == root) continue;
    const auto route = scatter ? links.route(root, j) : links.route(j, root);
    load[scatter ? route.front() : route.back()] += chunk;
    most_hops = std::max(most_hops, int(route.size()));
  }
  double busiest = 0;
  for (const auto& [link, bytes] : load) busiest = std::max(busiest, bytes);
  return {busiest, most_hops};
}

}  // namespace

TEST_SUITE("rooted sends") {
  TEST_CASE("send: only the destination receives the data; within 5% of the point-to-point closed form") {
    for (const SliceCase& c : kSlices) {
      const auto& chip = sim::load_chip(c.chip);
      const sim::Slice slice(chip, sim::parse_topology(c.topology));
      const int chips = slice.size();
      const int64_t bytes = 4 << 20, n = bytes / 4;
      for (const auto& [src, dst] : {std::pair{0, chips - 1}, std::pair{chips - 1, 1}, std::pair{1, 0}}) {
        auto out = testing::run_slice(kernels::make_send(shape_of(slice), chip), chip, slice, [&](int r) {
          return std::vector<Arg>{Arg::buf(HostBuffer::of(std::vector<int32_t>(n, r))), Arg::val(int32_t(bytes)),
                                  Arg::val(int32_t(src)), Arg::val(int32_t(dst))};
        });
        for (int r = 0; r < chips; ++r) {
          INFO(std::string(c.topology), " ", src, " -> ", dst, ", chip ", r);
          REQUIRE(out.chips[r][0].as<int32_t>() == std::vector<int32_t>(n, r == dst ? src : r));
        }
        const double simulated = double(out.result.cycles) / chip.clock_hz;
        const double expected = slice.point_to_point(src, dst, double(bytes));
        INFO(std::string(c.chip), " ", std::string(c.topology), " ", src, " -> ", dst, ": simulated ", simulated * 1e6,
             " us, closed form ", expected * 1e6, " us");
        CHECK(simulated >= expected * 0.95);
        CHECK(simulated <= expected * 1.05);
      }
    }
  }

  TEST_CASE("scatter and gather: every chunk reaches its place; the root's busiest link sets the time") {
    for (const SliceCase& c : kSlices) {
      const auto& chip = sim::load_chip(c.chip);
      const sim::Slice slice(chip, sim::parse_topology(c.topology));
      const int chips = slice.size();
      const int64_t chunk = std::max<int64_t>(64 << 10, (8 << 20) / chips), n = chunk / 4;  // bandwidth-bound
      for (const bool scatter : {true, false}) {
        for (const int root : {0, chips / 2 + 1 < chips ? chips / 2 + 1 : 1}) {
          const auto program = scatter ? kernels::make_scatter(shape_of(slice), chip) : kernels::make_gather(shape_of(slice), chip);
          // chip r's chunk j holds r * 1000 + j
          auto out = testing::run_slice(program, chip, slice, [&](int r) {
            std::vector<int32_t> data(chips * n);
            for (int j = 0; j < chips; ++j) std::fill(data.begin() + j * n, data.begin() + (j + 1) * n, r * 1000 + j);
            return std::vector<Arg>{Arg::buf(HostBuffer::of(data)), Arg::val(int32_t(chunk)), Arg::val(int32_t(root))};
          });
          for (int r = 0; r < chips; ++r) {
            const auto got = out.chips[r][0].as<int32_t>();
            int wrong = 0;
            for (int j = 0; j < chips; ++j) {
              // scatter: chip r's own chunk r came from the root; gather: the root's chunk j came from chip j
              const bool moved = scatter ? j == r : r == root;
              const int32_t from = moved ? (scatter ? root : j) : r;
              for (int64_t i = 0; i < n; ++i) wrong += got[j * n + i] != from * 1000 + j;
            }
            INFO(std::string(c.topology), scatter ? " scatter" : " gather", " from/to ", root, ", chip ", r);
            REQUIRE(wrong == 0);
          }
          const auto [busiest, hops] = root_link_load(chip, slice, root, double(chunk), scatter);
          const double simulated = double(out.result.cycles) / chip.clock_hz;
          const double bound = busiest / chip.ici_link_bandwidth_bytes_per_s;
          INFO(std::string(c.chip), " ", std::string(c.topology), scatter ? " scatter" : " gather", " root ", root,
               ": simulated ", simulated * 1e6, " us, busiest link ", bound * 1e6, " us");
          CHECK(simulated >= bound);
          CHECK(simulated <= 1.05 * bound + hops * chip.ici_hop_latency_ns * 1e-9);
        }
      }
    }
  }
}
