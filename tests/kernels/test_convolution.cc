// Convolutions built from graph nodes (kernels/compose/convolution.h), run on the simulator against
// direct double-precision loops: forward with bias, input gradient (and the transposed
// convolution of the output gradient by the same weight, which equals it) and weight gradient, over
// strides, paddings, dilations, groups, depthwise and conv1d-shaped inputs.
#include <doctest/doctest.h>

#include "kernels/compose/convolution.h"
#include "support/numerics.h"
#include "support/run_graph.h"

using namespace vtpu;
using kernels::DType;
using kernels::FusionStrategy;

namespace {

struct ConvCase {
  int64_t n, c, h, w, o, kh, kw;
  kernels::Conv2dParams p;
  int64_t oh() const { return kernels::conv_output_size(h, kh, p.stride[0], p.padding[0], p.dilation[0]); }
  int64_t ow() const { return kernels::conv_output_size(w, kw, p.stride[1], p.padding[1], p.dilation[1]); }
  int64_t cg() const { return c / p.groups; }
};

// Calls f(n, o, y, x, c, i, j, input_y, input_x) for every product term of the convolution whose
// input position lies inside the (unpadded) input; c is the input channel.
template <typename F>
void for_each_term(const ConvCase& k, F f) {
  const int64_t og = k.o / k.p.groups;
  for (int64_t n = 0; n < k.n; ++n)
    for (int64_t o = 0; o < k.o; ++o)
      for (int64_t y = 0; y < k.oh(); ++y)
        for (int64_t x = 0; x < k.ow(); ++x)
          for (int64_t cl = 0; cl < k.cg(); ++cl)
            for (int64_t i = 0; i < k.kh; ++i)
              for (int64_t j = 0; j < k.kw; ++j) {
                const int64_t iy = y * k.p.stride[0] - k.p.padding[0] + i * k.p.dilation[0];
                const int64_t ix = x * k.p.stride[1] - k.p.padding[1] + j * k.p.dilation[1];
                if (iy < 0 || iy >= k.h || ix < 0 || ix >= k.w) continue;
                f(n, o, y, x, (o / og) * k.cg() + cl, cl, i, j, iy, ix);
              }
}

struct Data {
  std::vector<float> x, w, b, gy;
};

Data data_for(const ConvCase& k) {
  return {testing::random_floats(k.n * k.c * k.h * k.w, 11, -1, 1), testing::random_floats(k.o * k.cg() * k.kh * k.kw, 12, -1, 1),
          testing::random_floats(k.o, 13, -1, 1), testing::random_floats(k.n * k.o * k.oh() * k.ow(), 14, -1, 1)};
}

enum class Which { Forward, InputGrad, Transposed, WeightGrad };

std::vector<double> reference(const ConvCase& k, const Data& d, Which which) {
  const int64_t oh = k.oh(), ow = k.ow();
  std::vector<double> out;
  if (which == Which::Forward) {
    out.resize(k.n * k.o * oh * ow);
    for (size_t i = 0; i < out.size(); ++i) out[i] = d.b[(i / (oh * ow)) % k.o];
  } else {
    out.assign(which == Which::WeightGrad ? d.w.size() : d.x.size(), 0.0);
  }
  for_each_term(k, [&](int64_t n, int64_t o, int64_t y, int64_t x, int64_t c, int64_t cl, int64_t i, int64_t j, int64_t iy, int64_t ix) {
    const size_t yi = ((n * k.o + o) * oh + y) * ow + x, xi = ((n * k.c + c) * k.h + iy) * k.w + ix,
                 wi = ((o * k.cg() + cl) * k.kh + i) * k.kw + j;
    if (which == Which::Forward) out[yi] += double(d.w[wi]) * d.x[xi];
    if (which == Which::InputGrad || which == Which::Transposed) out[xi] += double(d.w[wi]) * d.gy[yi];
    if (which == Which::WeightGrad) out[wi] += double(d.x[xi]) * d.gy[yi];
  });
  return out;
}

std::vector<float> run(const ConvCase& k, const Data& d, Which which, FusionStrategy strategy = FusionStrategy::Greedy) {
  kernels::Graph g;
  const int x = g.input({{k.n, k.c, k.h, k.w}, DType::F32}, "x");
  const int w = g.input({{k.o, k.cg(), k.kh, k.kw}, DType::F32}, "w");
  const int b = g.input({{k.o}, DType::F32}, "b");
  const int gy = g.input({{k.n, k.o, k.oh(), k.ow()}, DType::F32}, "grad_y");
  int out;
  if (which == Which::Forward) out = kernels::conv2d(g, x, w, b, k.p);
  else if (which == Which::InputGrad) out = kernels::conv2d_input_grad(g, gy, w, {k.h, k.w}, k.p);
  else if (which == Which::Transposed) out = kernels::conv_transpose2d(g, gy, w, {k.h, k.w}, k.p);
  else out = kernels::conv2d_weight_grad(g, gy, x, {k.kh, k.kw}, k.o, k.p);
  // Outputs are buffers: a reshape's result is its source's (as the bridge marks them).
  while (g.node(out).kind == kernels::NodeKind::Reshape) out = g.node(out).inputs[0];
  g.mark_output(out);
  kernels::ProgramCache cache;
  const auto plan = kernels::make_plan(g, strategy, sim::load_chip("v5e"), cache);
  std::vector<testing::Bound> inputs{{x, d.x}, {w, d.w}, {gy, d.gy}};
  if (which == Which::Forward) inputs.push_back({b, d.b});
  return testing::run_graph(g, plan, inputs);
}

kernels::Conv2dParams params(std::array<int64_t, 2> stride, std::array<int64_t, 2> padding, std::array<int64_t, 2> dilation,
                             int64_t groups = 1) {
  kernels::Conv2dParams p;
  p.stride = stride;
  p.padding = padding;
  p.dilation = dilation;
  p.groups = groups;
  p.passes = 6;  // f32-accurate MXU passes ('highest')
  return p;
}

// f32 inputs in [-1, 1], sums of at most a few hundred products, 6 MXU passes (f32-accurate):
// errors are f32 rounding of the accumulation, well inside 1e-4 relative plus 1e-4 absolute.
void check_all(const ConvCase& k) {
  const Data d = data_for(k);
  for (Which which : {Which::Forward, Which::InputGrad, Which::Transposed, Which::WeightGrad}) {
    CAPTURE(int(which));
    VTPU_CHECK_CLOSE(run(k, d, which), reference(k, d, which), 1e-4, 1e-4);
  }
}

}  // namespace

TEST_SUITE("kernels") {
  TEST_CASE("conv2d: 3x3, stride 1, padding 1 (columns by tap), both strategies agree") {
    const ConvCase k{2, 3, 9, 9, 5, 3, 3, params({1, 1}, {1, 1}, {1, 1})};
    check_all(k);
    const Data d = data_for(k);
    CHECK(run(k, d, Which::Forward, FusionStrategy::None) == run(k, d, Which::Forward, FusionStrategy::Greedy));
  }

  TEST_CASE("conv2d: strides, asymmetric padding and dilation") {
    check_all({1, 4, 17, 13, 6, 3, 2, params({2, 2}, {1, 0}, {1, 2})});
    check_all({2, 2, 11, 12, 3, 2, 3, params({3, 1}, {2, 1}, {2, 1})});
    // 16 channels: the transposed convolution runs channels last (col2im_channels_last)
    check_all({2, 16, 9, 11, 5, 3, 4, params({2, 3}, {1, 2}, {1, 2})});
    check_all({1, 32, 7, 8, 4, 3, 3, params({2, 2}, {0, 1}, {2, 1}, 2)});
  }

  TEST_CASE("conv2d: patch embedding (stride = kernel: columns by position)") {
    check_all({2, 3, 32, 32, 8, 8, 8, params({8, 8}, {0, 0}, {1, 1})});
  }

  TEST_CASE("conv2d: groups and depthwise") {
    check_all({2, 4, 8, 8, 6, 3, 3, params({1, 1}, {1, 1}, {1, 1}, 2)});
    check_all({2, 8, 10, 10, 8, 3, 3, params({2, 2}, {1, 1}, {1, 1}, 8)});
    check_all({1, 40, 6, 7, 40, 5, 5, params({1, 1}, {2, 2}, {1, 1}, 40)});  // depthwise: the vector unit
    check_all({2, 34, 5, 6, 51, 3, 3, params({1, 1}, {1, 1}, {1, 1}, 17)});  // 17 groups (regnet's): one batched matmul
    check_all({1, 64, 4, 5, 64, 1, 2, params({1, 1}, {0, 1}, {1, 1}, 32)});  // 32 groups of 2 channels
  }

  TEST_CASE("conv2d: conv1d as height 1") {
    check_all({2, 4, 1, 50, 3, 1, 5, params({1, 2}, {0, 2}, {1, 1})});
    // one image: the flipped taps are the second innermost dim of the gradient's gather
    check_all({1, 4, 1, 30, 3, 1, 5, params({1, 1}, {0, 2}, {1, 1})});
  }

  TEST_CASE("conv2d errors") {
    kernels::Graph g;
    const int x = g.input({{1, 4, 8, 8}, DType::F32});
    CHECK_THROWS_WITH_AS(kernels::conv2d(g, x, g.input({{2, 3, 3, 3}, DType::F32}), -1, params({1, 1}, {0, 0}, {1, 1})),
                         doctest::Contains("do not match"), kernels::KernelError);
    CHECK_THROWS_WITH_AS(kernels::conv2d(g, x, g.input({{2, 4, 9, 3}, DType::F32}), -1, params({1, 1}, {0, 0}, {1, 1})),
                         doctest::Contains("does not fit"), kernels::KernelError);
  }
}
