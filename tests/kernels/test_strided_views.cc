// Row-strided views (slices such as x[::2], x[:, 3:3+d], a qkv split) read in place by the
// streaming kernel that consumes them: one launch instead of a copy and the op, only the view's
// bytes read, values equal to index arithmetic on the host; and the views that must still be
// copied (read twice, read by a matmul, a step along the last dim) still are.
#include <doctest/doctest.h>

#include <algorithm>
#include <functional>
#include <string>

#include "kernels/compose/reduce_dims.h"
#include "kernels/graph/fusion.h"
#include "kernels/graph/plan.h"
#include "sim/sim_device.h"
#include "support/numerics.h"
#include "support/run_graph.h"

using namespace vtpu;
using kernels::DType;
using kernels::ExprOp;
using kernels::FusionStrategy;

namespace {

struct View {
  std::vector<int64_t> source, sizes, strides;
  int64_t offset = 0;
};

int64_t numel(const std::vector<int64_t>& shape) { return kernels::TensorType{shape, DType::F32}.numel(); }

// The view's elements, in order, by index arithmetic.
std::vector<float> gather(const std::vector<float>& src, const View& v) {
  std::vector<float> out;
  std::vector<int64_t> index(v.sizes.size(), 0);
  for (int64_t flat = 0; flat < numel(v.sizes); ++flat) {
    int64_t at = v.offset;
    for (size_t d = 0; d < v.sizes.size(); ++d) at += index[d] * v.strides[d];
    out.push_back(src[at]);
    for (size_t d = v.sizes.size(); d-- > 0;) {
      if (++index[d] < v.sizes[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

}  // namespace

TEST_SUITE("kernels") {
  TEST_CASE("a row-strided view is read in place by the elementwise kernel that uses it") {
    const View views[] = {
        {{64, 300}, {32, 300}, {600, 1}, 0},                  // x[::2]
        {{50, 384}, {50, 128}, {384, 1}, 128},                // x[:, 128:256] (a qkv split's k)
        {{2, 40, 96}, {2, 40, 32}, {3840, 96, 1}, 64},       // [..., 64:96] of a 3-D tensor
        {{5000}, {1200}, {1}, 1000},                          // a 1-D slice
        {{3, 1, 700}, {3, 1, 500}, {700, 9999, 1}, 7},       // a size-1 dim with any stride
    };
    for (const auto& v : views) {
      CAPTURE(v.offset);
      CAPTURE(v.sizes.size());
      kernels::Graph g;
      const int src = g.input({v.source, DType::F32}, "src");
      const int y = g.input({v.sizes, DType::F32}, "y");
      const int view = g.strided_copy(src, v.sizes, v.strides, v.offset);
      g.mark_output(g.binary(ExprOp::Add, g.binary_scalar(ExprOp::Mul, view, 3.0), y));
      const auto sd = testing::random_floats(numel(v.source), 5), yd = testing::random_floats(numel(v.sizes), 6);
      const auto xd = gather(sd, v);
      std::vector<double> want(xd.size());
      for (size_t i = 0; i < xd.size(); ++i) want[i] = double(float(xd[i] * 3.f) + yd[i]);
      kernels::ProgramCache cache;
      const auto plan = kernels::make_plan(g, FusionStrategy::Greedy, sim::load_chip("v5e"), cache);
      REQUIRE(plan.launches.size() == 1);
      bridge::PlanRun run;
      VTPU_CHECK_CLOSE(testing::run_graph(g, plan, {{src, sd}, {y, yd}}, &run), want, 0, 0);
      CHECK(run.hbm_read_bytes == uint64_t(2 * numel(v.sizes)) * 4);  // the view's rows, not the source
    }
  }

  TEST_CASE("a row op reads a strided view in place, through the reshape to its rows") {
    // sum(-1) and softmax over x[:, :, 100:400] of a [3, 7, 500] tensor, on both cores of v7.
    const View v{{3, 7, 500}, {3, 7, 300}, {3500, 500, 1}, 100};
    const auto sd = testing::random_floats(numel(v.source), 8);
    const auto xd = gather(sd, v);
    const auto v7 = sim::load_chip("v7");
    for (const auto op : {kernels::RowOp::Sum, kernels::RowOp::Softmax}) {
      kernels::Graph g;
      const int src = g.input({v.source, DType::F32}, "src");
      const int view = g.strided_copy(src, v.sizes, v.strides, v.offset);
      const int out = op == kernels::RowOp::Sum ? kernels::reduce_dims(g, view, {2}, op) : g.row(op, view);
      g.mark_output(out);
      kernels::ProgramCache cache;
      const auto plan = kernels::make_plan(g, FusionStrategy::Greedy, v7, cache);
      CHECK(plan.launches.size() == 1);
      kernels::Graph ref;  // the same op on the view made dense on the host
      const int dense = ref.input({v.sizes, DType::F32}, "x");
      ref.mark_output(op == kernels::RowOp::Sum ? kernels::reduce_dims(ref, dense, {2}, op) : ref.row(op, dense));
      const auto ref_plan = kernels::make_plan(ref, FusionStrategy::Greedy, v7, cache);
      const auto want = testing::run_graph(ref, ref_plan, {{dense, xd}}, nullptr, v7);  // same kernels, same order
      const auto got = testing::run_graph(g, plan, {{src, sd}}, nullptr, v7);
      REQUIRE(got.size() == want.size());
      for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == want[i]);
    }
  }

  TEST_CASE("subexpressions over views read in place share one kernel, as over copies") {
    // A compare-and-swap's halves: lo * 2 and hi + 1 read two slices of x; both and their max are
    // one kernel reading each slice in place.
    kernels::Graph g;
    const int x = g.input({{16, 256}, DType::F32}, "x");
    const int lo = g.strided_copy(x, {16, 128}, {256, 1}, 0), hi = g.strided_copy(x, {16, 128}, {256, 1}, 128);
    g.mark_output(g.binary(ExprOp::Max, g.binary_scalar(ExprOp::Mul, lo, 2.0), g.binary_scalar(ExprOp::Add, hi, 1.0)));
    const auto xd = testing::random_floats(16 * 256, 4);
    kernels::ProgramCache cache;
    const auto plan = kernels::make_plan(g, FusionStrategy::Greedy, sim::load_chip("v5e"), cache);
    CHECK(plan.launches.size() == 1);
    std::vector<double> want;
    for (int r = 0; r < 16; ++r) {
      for (int c = 0; c < 128; ++c) want.push_back(std::max(double(xd[r * 256 + c] * 2.f), double(xd[r * 256 + 128 + c] + 1.f)));
    }
    VTPU_CHECK_CLOSE(testing::run_graph(g, plan, {{x, xd}}), want, 0, 0);
  }

  TEST_CASE("views that cannot be read in place are still copied") {
    const auto chip = sim::load_chip("v5e");
    const auto launches = [&](const std::function<void(kernels::Graph&, int src)>& build) {
      kernels::Graph g;
      build(g, g.input({{64, 256}, DType::F32}, "src"));
      kernels::ProgramCache cache;
      return kernels::make_plan(g, FusionStrategy::Greedy, chip, cache).launches.size();
    };
    const auto half = [](kernels::Graph& g, int src) { return g.strided_copy(src, {64, 128}, {256, 1}, 0); };
    // read in place: one kernel
    CHECK(launches([&](kernels::Graph& g, int src) { g.mark_output(g.unary(ExprOp::Exp, half(g, src))); }) == 1);
    // read twice: copied once, both ops read the copy (they fuse)
    CHECK(launches([&](kernels::Graph& g, int src) {
            const int v = half(g, src);
            g.mark_output(g.binary(ExprOp::Add, g.unary(ExprOp::Exp, v), g.unary(ExprOp::Neg, v)));
          }) == 2);
    // every other element of a row: not rows of contiguous elements
    CHECK(launches([&](kernels::Graph& g, int src) {
            g.mark_output(g.unary(ExprOp::Exp, g.strided_copy(src, {64, 128}, {256, 2}, 0)));
          }) == 2);
    // a transpose
    CHECK(launches([&](kernels::Graph& g, int src) {
            g.mark_output(g.unary(ExprOp::Exp, g.strided_copy(src, {256, 64}, {1, 256}, 0)));
          }) == 2);
    // the view is the graph's output
    CHECK(launches([&](kernels::Graph& g, int src) { g.mark_output(half(g, src)); }) == 1);
    kernels::Graph g;
    const int src = g.input({{4, 6, 256}, DType::F32}, "src");
    const auto stride = [&](std::vector<int64_t> sizes, std::vector<int64_t> strides, int64_t offset = 0) {
      return kernels::view_row_stride(g.node(g.strided_copy(src, std::move(sizes), std::move(strides), offset)));
    };
    CHECK(stride({4, 6, 100}, {1536, 256, 1}, 3).value_or(-1) == 256);  // a slice of the last dim
    CHECK(stride({4, 3, 256}, {1536, 512, 1}).value_or(-1) == 512);     // x[:, ::2]: every other row
    CHECK(!stride({4, 3, 256}, {1536, 256, 1}));             // 3 rows of every 6: not one stride
    CHECK(!stride({6, 4, 256}, {256, 1536, 1}));             // outer dims swapped
    CHECK(!stride({4, 6, 128}, {1536, 256, 2}));             // a step along the row
    CHECK(!stride({24, 256}, {128, 1}));                     // overlapping rows
  }

  TEST_CASE("a view of a kernel's own output is not read by that kernel") {
    // y = x * 2 is written by one kernel; y[:, :128] + 1 must not join it (that kernel would read y
    // while writing it), so it reads y in place from a kernel after it.
    kernels::Graph g;
    const int x = g.input({{16, 256}, DType::F32}, "x");
    const int y = g.binary_scalar(ExprOp::Mul, x, 2.0);
    const int z = g.binary_scalar(ExprOp::Add, g.strided_copy(y, {16, 128}, {256, 1}, 0), 1.0);
    g.mark_output(z);
    const auto xd = testing::random_floats(16 * 256, 9);
    kernels::ProgramCache cache;
    const auto plan = kernels::make_plan(g, FusionStrategy::Greedy, sim::load_chip("v5e"), cache);
    CHECK(plan.launches.size() == 2);
    std::vector<double> want;
    for (int r = 0; r < 16; ++r) {
      for (int c = 0; c < 128; ++c) want.push_back(double(xd[r * 256 + c] * 2.f + 1.f));
    }
    VTPU_CHECK_CLOSE(testing::run_graph(g, plan, {{x, xd}}), want, 0, 0);
  }
}
