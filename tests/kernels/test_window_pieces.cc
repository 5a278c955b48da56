// Streaming launches over more than a launch's 4 GiB address window (or more elements than its
// int32 scalars count) run in pieces over ranges of the flat data (kernels/graph/window_pieces.h):
// the pieces cover every element once and each fits the window, and a plan run in pieces computes
// what it computes in one launch.
#include <doctest/doctest.h>

#include <cstring>
#include <random>

#include "kernels/codegen/operand.h"
#include "kernels/graph/plan.h"
#include "kernels/graph/window_pieces.h"
#include "support/run_graph.h"

using namespace vtpu;
using kernels::DType;
using kernels::ExprOp;
using kernels::FlatArg;
using kernels::FusionStrategy;

namespace {

// Checks that `pieces` cover `elements` in order, each buffer's range following the last and
// starting on a 4 KiB boundary, single-element operands bound whole, each piece inside `window`.
void check_cover(const std::vector<kernels::LaunchPiece>& pieces, const std::vector<FlatArg>& args, int64_t elements,
                 int64_t width, uint64_t window) {
  int64_t start = 0;
  for (const auto& p : pieces) {
    REQUIRE(p.ranges.size() == args.size());
    const int64_t n = p.scalars.at(2);
    CHECK(p.scalars == kernels::flat_stream_scalars(n, width));
    std::vector<uint64_t> bytes;
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i].element_bytes == 0) {
        CHECK(p.ranges[i].offset == 0);
        CHECK(p.ranges[i].bytes == args[i].whole_bytes);
      } else {
        CHECK(p.ranges[i].offset == args[i].element_bytes * uint64_t(start));
        CHECK(p.ranges[i].offset % 4096 == 0);
        CHECK(p.ranges[i].bytes == args[i].element_bytes * uint64_t(n));
      }
      bytes.push_back(p.ranges[i].bytes);
    }
    CHECK(isa::window_fits(bytes, window));
    start += n;
  }
  CHECK(start == elements);
}

}  // namespace

TEST_SUITE("kernels") {
  TEST_CASE("window pieces: gigabyte streams split into launches that each fit the window") {
    // a + b over two 2.8 GB f32 tensors (8.4 GB of buffers), plus a one-element operand.
    const std::vector<FlatArg> add{{4, 0}, {4, 0}, {0, 4}, {4, 0}};
    const int64_t n = 700'000'000;
    const auto pieces = kernels::flat_window_pieces(add, n, 2048);
    CHECK(pieces.size() == 2);  // 12 bytes per element: at most 357.9M elements a launch
    check_cover(pieces, add, n, 2048, isa::kWindowBytes);

    // More bf16 elements than a launch's int32 count holds: 4 GiB by itself, so in pieces.
    const std::vector<FlatArg> scale{{2, 0}, {2, 0}};
    const int64_t big = (int64_t{1} << 31) + 5000;
    const auto halves = kernels::flat_window_pieces(scale, big, 2048);
    CHECK(halves.size() == 3);  // 4 bytes per element: at most 1.07G elements a launch
    check_cover(halves, scale, big, 2048, isa::kWindowBytes);

    // What fits takes one launch, and what cannot fit even in pieces is refused by name.
    CHECK(kernels::flat_window_pieces(add, 1'000'000, 2048).empty());
    CHECK_THROWS_WITH_AS(kernels::flat_window_pieces({{4, 0}, {0, uint64_t{5} << 30}}, 4096, 2048),
                         doctest::Contains("does not fit a launch's"), kernels::KernelError);
  }

  TEST_CASE("window pieces: a fused stream run in pieces computes what one launch does") {
    // (x * y + s) * 0.5 - 1 over 300,000 f32 elements (s one element, broadcast), in pieces of a
    // 600 kB window: the same program launched over successive ranges of every buffer.
    kernels::Graph g;
    const kernels::TensorType t{{1000, 300}, DType::F32};
    const int x = g.input(t), y = g.input(t), s = g.input({{1}, DType::F32});
    const int sum = g.binary(ExprOp::Add, g.binary(ExprOp::Mul, x, y), s);
    g.mark_output(g.binary_scalar(ExprOp::Sub, g.binary_scalar(ExprOp::Mul, sum, 0.5), 1.0));
    kernels::ProgramCache cache;
    const sim::ChipConfig chip = sim::load_chip("v5e");
    const kernels::Plan whole = kernels::make_plan(g, FusionStrategy::Greedy, chip, cache);
    REQUIRE(whole.launches.size() == 1);
    REQUIRE(whole.launches[0].pieces.empty());

    std::vector<FlatArg> args;
    for (int v : whole.launches[0].args) {
      const auto& type = g.node(v).type;
      args.push_back(type.numel() == 1 ? FlatArg{0, 4} : FlatArg{4, uint64_t(type.numel()) * 4});
    }
    const int64_t width = whole.launches[0].scalars.at(1);
    kernels::Plan pieced = whole;
    pieced.launches[0].pieces = kernels::flat_window_pieces(args, t.numel(), width, 600'000);
    // The window's first base and a guard gap per buffer leave 255,931 bytes: 20,480 elements of
    // 12 bytes (x, y, out) in steps of 4,096, so 15 pieces.
    CHECK(pieced.launches[0].pieces.size() == 15);
    check_cover(pieced.launches[0].pieces, args, t.numel(), width, 600'000);

    std::mt19937 rng(3);
    std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
    std::vector<float> xs(t.numel()), ys(t.numel());
    for (auto* v : {&xs, &ys}) {
      for (float& e : *v) e = dist(rng);
    }
    const std::vector<testing::Bound> inputs{{x, xs}, {y, ys}, {s, {3.0f}}};
    bridge::PlanRun one, many;
    const auto expected = testing::run_graph(g, whole, inputs, &one);
    const auto got = testing::run_graph(g, pieced, inputs, &many);
    REQUIRE(got.size() == expected.size());
    CHECK(std::memcmp(got.data(), expected.data(), got.size() * 4) == 0);
    for (size_t i = 0; i < got.size(); i += 9973) CHECK(got[i] == doctest::Approx((xs[i] * ys[i] + 3.0f) * 0.5f - 1.0f).epsilon(1e-6));
    // Every element read and written once either way; each piece is a launch of its own.
    CHECK(many.launches == pieced.launches[0].pieces.size());
    CHECK(many.hbm_read_bytes == one.hbm_read_bytes + 4 * (many.launches - 1));  // s, once a piece
    CHECK(many.hbm_write_bytes == one.hbm_write_bytes);
  }
}
