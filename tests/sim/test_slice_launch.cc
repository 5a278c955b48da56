// Slice launches and chip-to-chip DMA (sim/slice_launch.h, sim/ici_links.h): data lands on the
// other chip, a transfer takes its bytes over the link's bandwidth plus a hop latency per link
// crossed (written out here from the preset), transfers sharing a link share its bandwidth, and
// the errors a kernel author can make across chips are reported, not hidden.
#include <doctest/doctest.h>

#include <numeric>

#include "sim/sim_error.h"
#include "support/run_slice.h"

using namespace vtpu;
using testing::Arg;
using testing::HostBuffer;

namespace {

// Chip `from` sends `src` to `to`'s `dst` and waits for its send; chip `to` waits for it; others idle.
const char* kOneCopy = R"(
.arg src buffer
.arg dst buffer
.arg bytes scalar
.arg from scalar
.arg to scalar
  schip s1
  sarg s2, src
  sarg s3, dst
  sarg s4, bytes
  sarg s5, from
  sarg s6, to
  beq s1, s5, sender
  beq s1, s6, receiver
  halt
sender:
  dma.remote dq0, sem0, sem1, s6, s3, s2, s4
  sem.wait sem0, 1
  halt
receiver:
  sem.wait sem1, 1
  halt
)";

std::vector<float> pattern(int chip, size_t n) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), float(chip * 1000));
  return v;
}

// Cycles for `bytes` over `links` links of `chip`'s ICI, from its preset.
double link_cycles(const sim::ChipConfig& chip, double bytes, int links) {
  return (bytes / chip.ici_link_bandwidth_bytes_per_s + links * chip.ici_hop_latency_ns * 1e-9) * chip.clock_hz;
}

}  // namespace

TEST_SUITE("sim") {
  TEST_CASE("dma.remote lands the bytes on the other chip after bytes / link bandwidth + a hop per link") {
    const auto& v4 = sim::load_chip("v4");
    const sim::Slice line(v4, {4});  // no wraparound: chip 0 to chip 3 crosses three links
    const size_t n = 256 * 1024;     // 1 MiB of f32
    for (int to : {1, 3}) {
      auto out = testing::run_slice(kOneCopy, v4, line, [&](int c) {
        return std::vector<Arg>{Arg::buf(HostBuffer::of(pattern(c, n))), Arg::buf(HostBuffer::of(std::vector<float>(n))),
                                Arg::val(int(n * 4)), Arg::val(0), Arg::val(to)};
      });
      CHECK(out.chips[to][1].as<float>() == pattern(0, n));
      CHECK(out.chips[2 - (to == 3)][1].as<float>() == std::vector<float>(n));  // a chip on the way keeps nothing
      const double expected = link_cycles(v4, n * 4.0, to);
      const double cycles = double(out.result.chips[to].cycles);
      CHECK(cycles >= expected);
      CHECK(cycles <= expected * 1.01 + 400);  // the HBM read's start and a few scalar instructions
      CHECK(out.result.chips[0].summary.ici_bytes == n * 4);
      REQUIRE(out.result.links.size() == size_t(to));
      CHECK(out.result.links[0].name == "chip 0 -> chip 1 (axis 0)");
    }
  }

  TEST_CASE("transfers sharing a link share its bandwidth; on different links they overlap") {
    const auto& v4 = sim::load_chip("v4");
    const sim::Slice line(v4, {3});
    const int bytes = 1 << 20;
    // Chips 0 and 1 both send to chip 2: chip 0's route is 0 -> 1 -> 2, so link 1 -> 2 carries both.
    // Then chips 0 and 2 both send to chip 1, over links 0 -> 1 and 2 -> 1.
    const std::string two_copies = R"(
.arg src buffer
.arg dst buffer
.arg bytes scalar
.arg target scalar
  schip s1
  sarg s2, src
  sarg s3, dst
  sarg s4, bytes
  sarg s6, target
  beq s1, s6, receiver
  smul s7, s1, s4
  sadd s3, s3, s7
  dma.remote dq0, sem0, sem1, s6, s3, s2, s4
  sem.wait sem0, 1
  halt
receiver:
  sem.wait sem1, 2
  halt
)";
    auto run = [&](int target) {
      return testing::run_slice(isa::assemble(two_copies, "two"), v4, line, [&](int c) {
        return std::vector<Arg>{Arg::buf(HostBuffer::of(pattern(c, bytes / 4))),
                                Arg::buf(HostBuffer::of(std::vector<float>(3 * bytes / 4))), Arg::val(bytes), Arg::val(target)};
      });
    };
    const auto shared = run(2), apart = run(1);
    const auto received = shared.chips[2][1].as<float>();
    CHECK(std::vector<float>(received.begin(), received.begin() + bytes / 4) == pattern(0, bytes / 4));
    CHECK(std::vector<float>(received.begin() + bytes / 4, received.begin() + bytes / 2) == pattern(1, bytes / 4));
    const double one = double(bytes) / v4.ici_link_bandwidth_bytes_per_s * v4.clock_hz;
    CHECK(double(shared.result.chips[2].cycles) >= 2 * one);
    CHECK(double(apart.result.chips[1].cycles) < 1.05 * link_cycles(v4, bytes, 1) + 400);
  }

  TEST_CASE("chips waiting for each other with nothing in flight are a deadlock, named") {
    const auto& v5e = sim::load_chip("v5e");
    const sim::Slice pair(v5e, {2});
    const char* src = R"(
  sem.wait sem1, 1
  halt
)";
    CHECK_THROWS_WITH_AS(testing::run_slice(src, v5e, pair, [](int) { return std::vector<Arg>{}; }),
                         doctest::Contains("chip 0 core 0 instruction 0 `sem.wait sem1, 1` waits for 1 signal(s)"),
                         sim::SimError);
  }

  TEST_CASE("dma.remote outside a slice launch, or to its own chip, is refused") {
    const char* src = R"(
.arg buf buffer
  sarg s1, buf
  sli s2, 64
  sli s3, 0
  dma.remote dq0, sem0, sem1, s3, s1, s1, s2
  sem.wait sem0, 1
  halt
)";
    CHECK_THROWS_WITH_AS(testing::run_program(src, {Arg::buf(HostBuffer::of(std::vector<float>(16)))}),
                         doctest::Contains("dma.remote outside a slice launch"), sim::SimError);
    const auto& v5e = sim::load_chip("v5e");
    CHECK_THROWS_WITH_AS(testing::run_slice(src, v5e, sim::Slice(v5e, {2}),
                                            [](int) { return std::vector<Arg>{Arg::buf(HostBuffer::of(std::vector<float>(16)))}; }),
                         doctest::Contains("dma.remote to chip 0: the slice has chips 0..1 and this is chip 0"), sim::SimError);
  }

  TEST_CASE("reading what a remote copy writes before waiting for its semaphore is a race") {
    const auto& v5e = sim::load_chip("v5e");
    // Chip 0 sends 64 KiB (signalling sem1 on chip 1), then an empty copy that signals sem2. Chip 1
    // waits only for sem2 and reads the 64 KiB: on a real chip nothing orders the two.
    const char* src = R"(
.arg buf buffer
  schip s1
  sarg s2, buf
  sli s3, 65536
  sli s4, 0
  sli s5, 1
  bne s1, s4, receiver
  dma.remote dq0, sem0, sem1, s5, s2, s2, s3
  dma.remote dq0, sem0, sem2, s5, s2, s2, s4
  sem.wait sem0, 2
  halt
receiver:
  sem.wait sem2, 1
  dma.h2v dq0, sem3, s4, s2, s5, s3, s3, s3
  sem.wait sem3, 1
  halt
)";
    CHECK_THROWS_WITH_AS(testing::run_slice(src, v5e, sim::Slice(v5e, {2}),
                                            [](int) { return std::vector<Arg>{Arg::buf(HostBuffer::of(std::vector<float>(16384)))}; }),
                         doctest::Contains("races the DMA issued by instruction 6"), sim::SimError);
  }
}
