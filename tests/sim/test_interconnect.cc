// The slice's closed forms (sim/interconnect.h) against the textbook costs of
// ../shared/REFERENCES.md, written out here by hand: ring all-gather or reduce-scatter
// (N-1)a + (N-1)/N * S/B, all-reduce twice that, a bidirectional ring with wraparound moving
// half the data each way in half the hops, torus collectives axis by axis.
#include <doctest/doctest.h>

#include <stdexcept>

#include "sim/chip_config.h"
#include "sim/interconnect.h"

using namespace vtpu;
using doctest::Approx;

namespace {
constexpr double kAlpha = 1e-6;  // every preset's hop latency
}

TEST_SUITE("sim") {
  TEST_CASE("a line of chips moves data as a one-way ring") {
    const sim::Slice line(sim::load_chip("v4"), {4});  // v4 wraps only on whole 4x4x4 cubes
    CHECK(line.wraps() == std::vector<bool>{false});
    const double b = 45e9, s = 64 << 20;
    CHECK(line.all_gather(s) == Approx(3 * kAlpha + 3.0 / 4 * s / b));
    CHECK(line.reduce_scatter(s) == Approx(3 * kAlpha + 3.0 / 4 * s / b));
    CHECK(line.all_reduce(s) == Approx(2 * (3 * kAlpha + 3.0 / 4 * s / b)));
    CHECK(line.broadcast(s) == Approx(3 * kAlpha + s / b));
    CHECK(line.all_to_all(s) == Approx(3 * kAlpha + s * 4 / (4 * b)));
  }

  TEST_CASE("an axis with wraparound is a bidirectional ring: half the data each way, half the hops") {
    const auto& v5e = sim::load_chip("v5e");
    const sim::Slice ring(v5e, {16});  // a full pod side wraps on v5e
    CHECK(ring.wraps() == std::vector<bool>{true});
    const double b = 50e9, s = 64 << 20;
    CHECK(ring.all_gather(s) == Approx(8 * kAlpha + 15.0 / 16 * s / (2 * b)));
    const sim::Slice line(v5e, {8});
    CHECK(line.wraps() == std::vector<bool>{false});
    CHECK(line.all_gather(s) == Approx(7 * kAlpha + 7.0 / 8 * s / b));
  }

  TEST_CASE("torus collectives go axis by axis") {
    const sim::Slice torus(sim::load_chip("v5e"), {2, 4});
    const double b = 50e9, s = 32 << 20;
    // reduce-scatter: the axis of 2 on all of S, then the axis of 4 on the half that is left
    const double rs = (kAlpha + 0.5 * s / b) + (3 * kAlpha + 3.0 / 4 * (s / 2) / b);
    CHECK(torus.reduce_scatter(s) == Approx(rs));
    CHECK(torus.all_gather(s) == Approx(rs));  // the reverse: grows the data back
    CHECK(torus.all_reduce(s) == Approx(2 * rs));
    CHECK(torus.size() == 8);
  }

  TEST_CASE("a copy between two chips costs their torus distance in hops, then the data") {
    const auto& v5p = sim::load_chip("v5p");
    const sim::Slice cube(v5p, {4, 4, 4});
    CHECK(cube.wraps() == std::vector<bool>{true, true, true});
    CHECK(cube.coordinates(63) == std::vector<int>{3, 3, 3});
    CHECK(cube.point_to_point(0, 63, 1 << 20) == Approx(3 * kAlpha + (1 << 20) / 100e9));  // the short way round
    const sim::Slice small(v5p, {2, 2, 2});
    CHECK(small.wraps() == std::vector<bool>{false, false, false});
    CHECK(small.point_to_point(0, 7, 0) == Approx(3 * kAlpha));
    CHECK(small.point_to_point(5, 5, 1 << 20) == 0.0);
  }

  TEST_CASE("topologies are parsed and checked") {
    CHECK(sim::parse_topology("2x4") == std::vector<int>{2, 4});
    CHECK(sim::parse_topology("4X4X4") == std::vector<int>{4, 4, 4});
    for (const char* bad : {"", "2x", "x2", "0x4", "2x2x2x2", "four", "-2"}) {
      CAPTURE(bad);
      CHECK_THROWS_WITH_AS(sim::parse_topology(bad), doctest::Contains("is not a slice such as"), std::invalid_argument);
    }
  }
}
