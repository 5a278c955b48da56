// Streaming launches over more than a launch's 4 GiB address window (or more elements than its
// int32 scalars count) run in pieces over ranges of the flat data (kernels/graph/window_pieces.h):
// the pieces cover every element once and each fits the window, and a plan run in pieces computes
// what it computes in one launch.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "kernels/codegen/operand.h"
#include "kernels/graph/plan.h"
#include "kernels/graph/window_pieces.h"
#include "support/run_graph.h"

using namespace vtpu;
using kernels::DType;
using kernels::ExprOp;
using kernels::RangedArg;
using kernels::FusionStrategy;

namespace {

// Checks that `pieces` cover `elements` in order, each of whole rows of `width` but the last, each
// buffer's range following the last, single-element operands bound whole, each piece inside
// `window`.
void check_cover(const std::vector<kernels::LaunchPiece>& pieces, const std::vector<RangedArg>& args, int64_t elements,
                 int64_t width, uint64_t window) {
  int64_t start = 0;
  for (const auto& p : pieces) {
    REQUIRE(p.ranges.size() == args.size());
    const int64_t n = p.scalars.at(2);
    CHECK(p.scalars == kernels::flat_stream_scalars(n, width));
    std::vector<uint64_t> bytes;
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i].unit_bytes == 0) {
        CHECK(p.ranges[i].offset == 0);
        CHECK(p.ranges[i].bytes == args[i].whole_bytes);
      } else {
        CHECK(p.ranges[i].offset == args[i].unit_bytes * uint64_t(start));
        CHECK(p.ranges[i].bytes == args[i].unit_bytes * uint64_t(n));
      }
      bytes.push_back(p.ranges[i].bytes);
    }
    CHECK(isa::window_fits(bytes, window));
    CHECK((n % width == 0 || start + n == elements));
    start += n;
  }
  CHECK(start == elements);
}

}  // namespace

TEST_SUITE("kernels") {
  TEST_CASE("window pieces: gigabyte streams split into launches that each fit the window") {
    // a + b over two 2.8 GB f32 tensors (8.4 GB of buffers), plus a one-element operand.
    const std::vector<RangedArg> add{{4, 0}, {4, 0}, {0, 4}, {4, 0}};
    const int64_t n = 700'000'000;
    const auto pieces = kernels::flat_window_pieces(add, n, 2048);
    CHECK(pieces.size() == 2);  // 12 bytes per element: at most 357.9M elements a launch
    check_cover(pieces, add, n, 2048, isa::kWindowBytes);

    // More bf16 elements than a launch's int32 count holds: 4 GiB by itself, so in pieces.
    const std::vector<RangedArg> scale{{2, 0}, {2, 0}};
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

    std::vector<RangedArg> args;
    for (int v : whole.launches[0].args) {
      const auto& type = g.node(v).type;
      args.push_back(type.numel() == 1 ? RangedArg{0, 4} : RangedArg{4, uint64_t(type.numel()) * 4});
    }
    const int64_t width = whole.launches[0].scalars.at(1);
    kernels::Plan pieced = whole;
    pieced.launches[0].pieces = kernels::flat_window_pieces(args, t.numel(), width, 600'000);
    // The window's first base and a guard gap per buffer leave 255,931 bytes: 20,480 elements of
    // 12 bytes (x, y, out) in whole rows of 2,048, so 15 pieces.
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

  TEST_CASE("window pieces: row kernels run in pieces of rows, each piece's rows and results its own") {
    // Per row of [1000, 300] f32: sum(x * y) (two ranged operands, a one-per-row result), a
    // softmax (a whole row out per row in) and an RMSNorm with its weight (read whole by every
    // piece), each in pieces of a 400 kB window against one launch of the same plan.
    const kernels::TensorType t{{1000, 300}, DType::F32};
    const sim::ChipConfig chip = sim::load_chip("v5e");
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
    const auto random = [&](int64_t n) {
      std::vector<float> v(n);
      for (float& e : v) e = dist(rng);
      return v;
    };
    for (const kernels::RowOp op : {kernels::RowOp::Sum, kernels::RowOp::Softmax, kernels::RowOp::RmsNorm}) {
      CAPTURE(kernels::row_op_name(op));
      kernels::Graph g;
      const int x = g.input(t), y = g.input(t), w = g.input({{300}, DType::F32});
      const bool norm = op == kernels::RowOp::RmsNorm;
      g.mark_output(g.row(op, g.binary(ExprOp::Mul, x, y), norm ? w : -1));
      kernels::ProgramCache cache;
      const kernels::Plan whole = kernels::make_plan(g, FusionStrategy::Greedy, chip, cache);
      REQUIRE(whole.launches.size() == 1);
      REQUIRE(whole.launches[0].pieces.empty());
      const std::vector<kernels::Operand> inputs(2, kernels::Operand{DType::F32, kernels::Layout::Full});
      kernels::Plan pieced = whole;
      auto& pieces = pieced.launches[0].pieces;
      pieces = kernels::row_window_pieces(g, whole.launches[0].args, inputs, 1, 1000, 300, 512, 400'000);
      CHECK(pieces.size() > 1);
      int64_t start = 0;
      const uint64_t out_row = op == kernels::RowOp::Sum ? 4 : 1200;
      for (const auto& p : pieces) {
        const int64_t n = p.scalars.at(0);
        CHECK(p.scalars == kernels::stream_scalars(n, 300, inputs));
        CHECK((n % 8 == 0 || start + n == 1000));
        CHECK(p.ranges.at(0).offset == uint64_t(start) * 1200);
        CHECK(p.ranges.at(1).bytes == uint64_t(n) * 1200);
        if (norm) CHECK(p.ranges.at(2).bytes == 1200);  // the weight, whole
        CHECK(p.ranges.back().offset == uint64_t(start) * out_row);
        CHECK(p.ranges.back().bytes == uint64_t(n) * out_row);
        start += n;
      }
      CHECK(start == 1000);
      const std::vector<testing::Bound> data{{x, random(t.numel())}, {y, random(t.numel())}, {w, random(300)}};
      bridge::PlanRun one, many;
      const auto expected = testing::run_graph(g, whole, data, &one);
      const auto got = testing::run_graph(g, pieced, data, &many);
      REQUIRE(got.size() == expected.size());
      CHECK(std::memcmp(got.data(), expected.data(), got.size() * 4) == 0);
      CHECK(many.launches == pieces.size());
      CHECK(many.hbm_write_bytes == one.hbm_write_bytes);
    }
  }

  TEST_CASE("window pieces: an elementwise broadcast runs in pieces of rows") {
    // x * c + w over [1000, 300] f32, c a column ([1000, 1], ranged with the rows) and w a row
    // ([300], read whole): pieces of a 400 kB window against one launch.
    kernels::Graph g;
    const int x = g.input({{1000, 300}, DType::F32}), c = g.input({{1000, 1}, DType::F32}), w = g.input({{300}, DType::F32});
    g.mark_output(g.binary(ExprOp::Add, g.binary(ExprOp::Mul, x, c), w));
    kernels::ProgramCache cache;
    const kernels::Plan whole = kernels::make_plan(g, FusionStrategy::Greedy, sim::load_chip("v5e"), cache);
    REQUIRE(whole.launches.size() == 1);
    const std::vector<int>& args = whole.launches[0].args;
    REQUIRE(args.size() == 4);
    REQUIRE(args.back() == g.outputs()[0]);
    std::vector<kernels::Operand> inputs;
    for (int i = 0; i < 3; ++i) {
      inputs.push_back({DType::F32, args[i] == x ? kernels::Layout::Full : args[i] == c ? kernels::Layout::Column : kernels::Layout::Row});
    }
    const auto at = [&](int v) { return size_t(std::find(args.begin(), args.end(), v) - args.begin()); };
    kernels::Plan pieced = whole;
    auto& pieces = pieced.launches[0].pieces;
    pieces = kernels::row_window_pieces(g, whole.launches[0].args, inputs, 1, 1000, 300, 512, 400'000);
    REQUIRE(pieces.size() > 1);
    int64_t start = 0;
    for (const auto& p : pieces) {
      const int64_t n = p.scalars.at(0);
      CHECK(p.ranges[at(x)].offset == uint64_t(start) * 1200);
      CHECK(p.ranges[at(c)].offset == uint64_t(start) * 4);  // the column follows the rows
      CHECK(p.ranges[at(w)].offset == 0);
      CHECK(p.ranges[at(w)].bytes == 1200);  // the row, whole
      CHECK(p.ranges[3].offset == uint64_t(start) * 1200);
      start += n;
    }
    CHECK(start == 1000);
    std::vector<float> xs(300'000), cs(1000), ws(300);
    for (size_t i = 0; i < xs.size(); ++i) xs[i] = float(i % 97) - 40.0f;
    for (size_t i = 0; i < cs.size(); ++i) cs[i] = float(i % 13) * 0.25f;
    for (size_t i = 0; i < ws.size(); ++i) ws[i] = float(i % 7);
    const std::vector<testing::Bound> data{{x, xs}, {c, cs}, {w, ws}};
    const auto got = testing::run_graph(g, pieced, data);
    REQUIRE(got.size() == xs.size());
    bool exact = true;
    for (size_t i = 0; i < got.size(); ++i) exact &= got[i] == xs[i] * cs[i / 300] + ws[i % 300];
    CHECK(exact);
  }
}
