// Collective kernels (kernels/generators/collectives.h) run on a slice launch: every chip ends
// with every chip's data, and the simulated time of the kernel (links, hops, DMAs and the scalar
// code together) is within 5% of the torus' closed form (sim::Slice, itself checked against the
// textbook costs in tests/sim/test_interconnect.cc) on lines, rings, 2-D and 3-D tori.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "kernels/codegen/kernel_error.h"
#include "kernels/generators/collectives.h"
#include "sim/interconnect.h"
#include "support/run_slice.h"

using namespace vtpu;
using testing::Arg;
using testing::HostBuffer;

namespace {

kernels::SliceShape shape_of(const sim::Slice& slice) { return {slice.axes(), slice.wraps()}; }

// All-gathers `total_bytes` (each chip's chunk is a run of its own value) and checks every chip's
// result; returns the simulated seconds.
double all_gather(const std::string& chip_name, const std::string& topology, int64_t total_bytes) {
  const auto& chip = sim::load_chip(chip_name);
  const sim::Slice slice(chip, sim::parse_topology(topology));
  const int chips = slice.size();
  const int64_t chunk = total_bytes / chips;
  const auto program = kernels::make_all_gather(shape_of(slice), chip);
  auto out = testing::run_slice(program, chip, slice, [&](int c) {
    std::vector<int32_t> mine(total_bytes / 4, -1);
    std::fill(mine.begin() + c * chunk / 4, mine.begin() + (c + 1) * chunk / 4, c);
    return std::vector<Arg>{Arg::buf(HostBuffer::of(mine)), Arg::val(int32_t(chunk))};
  });
  for (int c = 0; c < chips; ++c) {
    const auto got = out.chips[c][0].as<int32_t>();
    int wrong = 0;
    for (size_t i = 0; i < got.size(); ++i) wrong += got[i] != int32_t(i * 4 / chunk);
    INFO(topology, " chip ", c);
    REQUIRE(wrong == 0);
  }
  return double(out.result.cycles) / chip.clock_hz;
}

double closed_form(const std::string& chip_name, const std::string& topology, int64_t total_bytes) {
  const auto& chip = sim::load_chip(chip_name);
  return sim::Slice(chip, sim::parse_topology(topology)).all_gather(double(total_bytes));
}

}  // namespace

TEST_SUITE("kernels") {
  TEST_CASE("all-gather: every chip ends with every chunk, within 5% of the closed form") {
    struct Case {
      const char* chip;
      const char* topology;
      const char* shape;
    };
    const Case cases[] = {
        {"v4", "4", "line"},
        {"v5e", "8", "line"},
        {"v5e", "16", "ring (wraparound on a full v5e pod side)"},
        {"v5e", "2x4", "2-D, no wraparound"},
        {"v5e", "4x16", "2-D, one axis wrapping"},
        {"v4", "2x2x2", "3-D, no wraparound"},
        {"v4", "4x4x4", "3-D torus, every axis wrapping"},
    };
    for (const auto& c : cases) {
      for (int64_t bytes : {int64_t{1} << 16, int64_t{16} << 20}) {  // latency-bound, bandwidth-bound
        const double simulated = all_gather(c.chip, c.topology, bytes);
        const double expected = closed_form(c.chip, c.topology, bytes);
        INFO(std::string(c.chip), " ", std::string(c.topology), " (", std::string(c.shape), "), ", bytes, " bytes: simulated ", simulated * 1e6,
             " us, closed form ", expected * 1e6, " us");
        CHECK(simulated >= expected * 0.95);
        CHECK(simulated <= expected * 1.05);
      }
    }
  }

  TEST_CASE("collectives refuse a slice that is not one to three axes") {
    CHECK_THROWS_WITH_AS(kernels::make_all_gather({{}, {}}, sim::load_chip("v5e")),
                         doctest::Contains("one to three axes"), kernels::KernelError);
  }
}
