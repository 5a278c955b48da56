// Pooling built from window gathers (kernels/compose/pooling.h), run on the simulator against direct
// loops written from torch's CPU kernels: average pooling with and without padding in the
// divisor, ceil_mode and divisor_override; max pooling's values and first-maximum positions
// (inputs with ties), dilation; both gradients.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "kernels/compose/pooling.h"
#include "support/numerics.h"
#include "support/run_graph.h"

using namespace vtpu;
using kernels::DType;

namespace {

constexpr int64_t kN = 2, kC = 3, kH = 9, kW = 11;

kernels::Pool2dParams params(kernels::Pair kernel, kernels::Pair stride, kernels::Pair padding, bool ceil_mode = false) {
  kernels::Pool2dParams p;
  p.kernel = kernel;
  p.stride = stride;
  p.padding = padding;
  p.ceil_mode = ceil_mode;
  return p;
}

kernels::Pair out_hw(const kernels::Pool2dParams& p) {
  return {kernels::pool_output_size(kH, p.kernel[0], p.stride[0], p.padding[0], p.dilation[0], p.ceil_mode),
          kernels::pool_output_size(kW, p.kernel[1], p.stride[1], p.padding[1], p.dilation[1], p.ceil_mode)};
}

// Values on a coarse grid, so that windows hold ties.
std::vector<float> coarse(size_t n, uint32_t seed) {
  auto v = testing::random_floats(n, seed, -2, 2);
  for (float& x : v) x = std::round(x * 2) / 2;
  return v;
}

// torch's avg_pool2d window: [h0, h1) x [w0, w1) clipped to the input, and its divisor.
struct AvgWindow {
  int64_t h0, h1, w0, w1;
  double divisor;
};

AvgWindow avg_window(const kernels::Pool2dParams& p, int64_t oh, int64_t ow) {
  int64_t h0 = oh * p.stride[0] - p.padding[0], w0 = ow * p.stride[1] - p.padding[1];
  int64_t h1 = std::min(h0 + p.kernel[0], kH + p.padding[0]), w1 = std::min(w0 + p.kernel[1], kW + p.padding[1]);
  const double padded_size = double((h1 - h0) * (w1 - w0));
  h0 = std::max<int64_t>(h0, 0), w0 = std::max<int64_t>(w0, 0), h1 = std::min(h1, kH), w1 = std::min(w1, kW);
  const double divisor = p.divisor_override ? double(*p.divisor_override) : p.count_include_pad ? padded_size : double((h1 - h0) * (w1 - w0));
  return {h0, h1, w0, w1, divisor};
}

// Runs a graph built by `build` over inputs x [N,C,H,W], grad_y [N,C,OH,OW] and indices.
template <typename Build>
std::vector<float> run(const kernels::Pool2dParams& p, const std::vector<float>& x, const std::vector<float>& gy,
                       const std::vector<float>& indices, Build build) {
  const auto out = out_hw(p);
  kernels::Graph g;
  const int xv = g.input({{kN, kC, kH, kW}, DType::F32}, "x");
  const int gv = g.input({{kN, kC, out[0], out[1]}, DType::F32}, "grad_y");
  const int iv = g.input({{kN, kC, out[0], out[1]}, DType::F32}, "indices");
  int y = build(g, xv, gv, iv);
  while (g.node(y).kind == kernels::NodeKind::Reshape) y = g.node(y).inputs[0];
  g.mark_output(y);
  kernels::ProgramCache cache;
  const auto plan = kernels::make_plan(g, kernels::FusionStrategy::Greedy, sim::load_chip("v5e"), cache);
  return testing::run_graph(g, plan, {{xv, x}, {gv, gy}, {iv, indices}});
}

void check_average(const kernels::Pool2dParams& p) {
  const auto out = out_hw(p);
  const auto x = testing::random_floats(kN * kC * kH * kW, 21), gy = testing::random_floats(kN * kC * out[0] * out[1], 22);
  std::vector<double> want_y(gy.size(), 0), want_dx(x.size(), 0);
  for (int64_t nc = 0; nc < kN * kC; ++nc)
    for (int64_t oh = 0; oh < out[0]; ++oh)
      for (int64_t ow = 0; ow < out[1]; ++ow) {
        const AvgWindow w = avg_window(p, oh, ow);
        const size_t yi = (nc * out[0] + oh) * out[1] + ow;
        for (int64_t h = w.h0; h < w.h1; ++h)
          for (int64_t c = w.w0; c < w.w1; ++c) {
            want_y[yi] += x[(nc * kH + h) * kW + c] / w.divisor;
            want_dx[(nc * kH + h) * kW + c] += gy[yi] / w.divisor;
          }
      }
  const std::vector<float> none(gy.size(), 0);
  VTPU_CHECK_CLOSE(run(p, x, gy, none, [&](kernels::Graph& g, int xv, int, int) { return kernels::avg_pool2d(g, xv, p); }),
                   want_y, 1e-5, 1e-5);
  VTPU_CHECK_CLOSE(run(p, x, gy, none, [&](kernels::Graph& g, int, int gv, int) {
                     return kernels::avg_pool2d_backward(g, gv, {kH, kW}, p);
                   }),
                   want_dx, 1e-5, 1e-5);
}

void check_max(const kernels::Pool2dParams& p) {
  const auto out = out_hw(p);
  const auto x = coarse(kN * kC * kH * kW, 31), gy = testing::random_floats(kN * kC * out[0] * out[1], 32);
  std::vector<double> want_y(gy.size()), want_at(gy.size()), want_dx(x.size(), 0);
  std::vector<float> indices(gy.size());
  for (int64_t nc = 0; nc < kN * kC; ++nc)
    for (int64_t oh = 0; oh < out[0]; ++oh)
      for (int64_t ow = 0; ow < out[1]; ++ow) {
        double best = -std::numeric_limits<double>::infinity();
        int64_t at = -1;
        for (int64_t i = 0; i < p.kernel[0]; ++i)
          for (int64_t j = 0; j < p.kernel[1]; ++j) {
            const int64_t h = oh * p.stride[0] - p.padding[0] + i * p.dilation[0], c = ow * p.stride[1] - p.padding[1] + j * p.dilation[1];
            if (h < 0 || h >= kH || c < 0 || c >= kW) continue;
            const double v = x[(nc * kH + h) * kW + c];
            if (at < 0 || v > best) best = v, at = h * kW + c;  // the first maximum in scan order
          }
        const size_t yi = (nc * out[0] + oh) * out[1] + ow;
        want_y[yi] = best;
        want_at[yi] = double(at);
        indices[yi] = float(at);
        want_dx[nc * kH * kW + at] += gy[yi];
      }
  VTPU_CHECK_CLOSE(run(p, x, gy, indices, [&](kernels::Graph& g, int xv, int, int) { return kernels::max_pool2d(g, xv, p).first; }),
                   want_y, 0, 0);
  VTPU_CHECK_CLOSE(run(p, x, gy, indices, [&](kernels::Graph& g, int xv, int, int) { return kernels::max_pool2d(g, xv, p).second; }),
                   want_at, 0, 0);
  VTPU_CHECK_CLOSE(run(p, x, gy, indices, [&](kernels::Graph& g, int, int gv, int iv) {
                     return kernels::max_pool2d_backward(g, gv, iv, {kH, kW}, p);
                   }),
                   want_dx, 1e-6, 1e-6);
}

}  // namespace

TEST_SUITE("kernels") {
  TEST_CASE("avg_pool2d: divisors with and without padding, ceil_mode, divisor_override") {
    check_average(params({2, 2}, {2, 2}, {0, 0}));
    check_average(params({3, 3}, {2, 2}, {1, 1}));
    auto p = params({3, 3}, {2, 2}, {1, 1}, /*ceil_mode=*/true);
    check_average(p);
    p.count_include_pad = false;
    check_average(p);
    auto o = params({3, 2}, {1, 2}, {1, 1});
    o.divisor_override = 5;
    check_average(o);
  }

  TEST_CASE("max_pool2d: values, first-maximum positions and gradient, with ties") {
    check_max(params({2, 2}, {2, 2}, {0, 0}));
    check_max(params({3, 3}, {2, 2}, {1, 1}, /*ceil_mode=*/true));
    auto d = params({3, 2}, {1, 2}, {1, 0});
    d.dilation = {2, 2};
    check_max(d);
  }

  TEST_CASE("pooling errors") {
    kernels::Graph g;
    const int x = g.input({{1, 1, 4, 4}, DType::F32});
    CHECK_THROWS_WITH_AS(kernels::avg_pool2d(g, x, params({2, 2}, {1, 1}, {2, 2})), doctest::Contains("half the kernel"), kernels::KernelError);
    auto o = params({2, 2}, {1, 1}, {0, 0});
    o.divisor_override = 0;
    CHECK_THROWS_WITH_AS(kernels::avg_pool2d(g, x, o), doctest::Contains("not zero"), kernels::KernelError);
    CHECK_THROWS_WITH_AS(kernels::avg_pool2d(g, g.input({{4, 4}, DType::F32}), params({2, 2}, {1, 1}, {0, 0})), doctest::Contains("4-D"),
                         kernels::KernelError);
  }
}
