// The fused elementwise kernel on the simulator against host references: shapes with ragged
// edges, the four operand layouts, every expression op, dtypes, and the memory-bound timing bound.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <functional>
#include <tuple>
#include <vector>

#include "kernels/generators/elementwise.h"
#include "sim/bf16.h"
#include "sim/f16.h"
#include "support/numerics.h"
#include "support/run_program.h"

using namespace vtpu;
using kernels::DType;
using kernels::ExprOp;
using kernels::Layout;
using kernels::ValueType;

namespace {

const sim::ChipConfig& v5e() {
  static const sim::ChipConfig chip = sim::load_chip("v5e");
  return chip;
}

// Runs a single-output f32 kernel of `spec` on f32 inputs, returns the output. `rows`, `cols`: the
// shape passed at launch (default spec.rows x spec.cols, the shape the blocks were sized for);
// Periodic inputs pass spec's period_rows.
std::vector<float> run_f32(const kernels::ElementwiseSpec& spec, const std::vector<std::vector<float>>& inputs,
                           sim::LaunchResult* result = nullptr, int64_t rows = 0, int64_t cols = 0) {
  if (rows == 0) rows = spec.rows;
  if (cols == 0) cols = spec.cols;
  const isa::Program program = kernels::make_elementwise(spec, v5e());
  std::vector<testing::Arg> args;
  for (const auto& in : inputs) args.push_back(testing::Arg::buf(testing::HostBuffer::of(in)));
  args.push_back(testing::Arg::buf(testing::HostBuffer::of(std::vector<float>(size_t(rows * cols)))));
  for (int32_t v : kernels::stream_scalars(rows, cols, spec.inputs)) args.push_back(testing::Arg::val(v));
  auto out = testing::run_program(program, args);
  if (result) *result = out.result;
  return out.buffers[inputs.size()].as<float>();
}

kernels::ElementwiseSpec unary_spec(int64_t rows, int64_t cols, ExprOp op) {
  kernels::ElementwiseSpec spec;
  spec.rows = rows;
  spec.cols = cols;
  spec.inputs = {{DType::F32, Layout::Full}};
  spec.outputs = {DType::F32};
  spec.expr.add_output(spec.expr.unary(op, spec.expr.input(0, ValueType::F32)));
  return spec;
}

double gelu_ref(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh_ref(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

// a (in `dtype`, encoded by `encode`) times b (f32) written in `dtype`, over 7 x 111 elements
// drawn from [lo, hi]: the inputs' bits, b, and the result's bits.
std::tuple<std::vector<uint16_t>, std::vector<float>, std::vector<uint16_t>> narrow_float_product(
    DType dtype, uint16_t (*encode)(float), float lo, float hi) {
  const int64_t n = 777;
  kernels::ElementwiseSpec spec;
  spec.rows = 7;
  spec.cols = 111;
  spec.inputs = {{dtype, Layout::Full}, {DType::F32, Layout::Full}};
  spec.outputs = {dtype};
  auto& e = spec.expr;
  e.add_output(e.binary(ExprOp::Mul, e.input(0, ValueType::F32), e.input(1, ValueType::F32)));
  const auto af = testing::random_floats(n, 11, lo, hi), b = testing::random_floats(n, 12, lo, hi);
  std::vector<uint16_t> a(n);
  for (int64_t i = 0; i < n; ++i) a[i] = encode(af[i]);
  auto out = testing::run_program(kernels::make_elementwise(spec, v5e()),
                                  {testing::Arg::buf(testing::HostBuffer::of(a)), testing::Arg::buf(testing::HostBuffer::of(b)),
                                   testing::Arg::buf(testing::HostBuffer::of(std::vector<uint16_t>(n))),
                                   testing::Arg::val(int32_t(spec.rows)), testing::Arg::val(int32_t(spec.cols))});
  return {a, b, out.buffers[2].as<uint16_t>()};
}

}  // namespace

TEST_SUITE("kernels") {
  TEST_CASE("elementwise add is exact over ragged shapes") {
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 1}, {7, 129}, {129, 1000}, {1000, 7}, {3, 5000}, {300, 300}}) {
      CAPTURE(rows);
      CAPTURE(cols);
      kernels::ElementwiseSpec spec;
      spec.rows = rows;
      spec.cols = cols;
      spec.inputs = {{DType::F32, Layout::Full}, {DType::F32, Layout::Full}};
      spec.outputs = {DType::F32};
      auto& e = spec.expr;
      e.add_output(e.binary(ExprOp::Add, e.input(0, ValueType::F32), e.input(1, ValueType::F32)));
      const size_t n = size_t(rows * cols);
      const auto a = testing::random_floats(n, 1), b = testing::random_floats(n, 2);
      const auto c = run_f32(spec, {a, b});
      std::vector<double> want(n);
      for (size_t i = 0; i < n; ++i) want[i] = a[i] + b[i];  // one f32 rounding, same as the VPU
      VTPU_CHECK_CLOSE(c, want, 0, 0);
    }
  }

  TEST_CASE("broadcast layouts: x * row + column - scalar") {
    const int64_t rows = 37, cols = 300;
    kernels::ElementwiseSpec spec;
    spec.rows = rows;
    spec.cols = cols;
    spec.inputs = {{DType::F32, Layout::Full}, {DType::F32, Layout::Row}, {DType::F32, Layout::Column},
                   {DType::F32, Layout::Scalar}};
    spec.outputs = {DType::F32};
    auto& e = spec.expr;
    const int xr = e.binary(ExprOp::Mul, e.input(0, ValueType::F32), e.input(1, ValueType::F32));
    const int plus = e.binary(ExprOp::Add, xr, e.input(2, ValueType::F32));
    e.add_output(e.binary(ExprOp::Sub, plus, e.input(3, ValueType::F32)));
    const auto x = testing::random_floats(rows * cols, 3), row = testing::random_floats(cols, 4),
               col = testing::random_floats(rows, 5), scalar = testing::random_floats(1, 6);
    const auto out = run_f32(spec, {x, row, col, scalar});
    std::vector<double> want(rows * cols);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        const float v = (x[r * cols + c] * row[c] + col[r]) - scalar[0];  // f32 step by step, like the VPU
        want[r * cols + c] = v;
      }
    }
    VTPU_CHECK_CLOSE(out, want, 0, 0);
  }

  TEST_CASE("the row count is a launch argument: blocks sized for 64 rows serve 16 to 4096") {
    const int64_t cols = 300, period = 16;
    kernels::ElementwiseSpec spec;
    spec.rows = 64;
    spec.cols = cols;
    spec.inputs = {{DType::F32, Layout::Full}, {DType::F32, Layout::Column}, {DType::F32, Layout::Periodic, period}};
    spec.outputs = {DType::F32};
    auto& e = spec.expr;
    e.add_output(e.binary(ExprOp::Add, e.binary(ExprOp::Mul, e.input(0, ValueType::F32), e.input(1, ValueType::F32)),
                          e.input(2, ValueType::F32)));
    const auto mask = testing::random_floats(period * cols, 7);
    for (int64_t rows : {16, 48, 64, 4096}) {  // fewer rows than sized; one block; many blocks
      CAPTURE(rows);
      const auto x = testing::random_floats(rows * cols, 8), col = testing::random_floats(rows, 9);
      const auto out = run_f32(spec, {x, col, mask}, nullptr, rows);
      std::vector<double> want(rows * cols);
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < cols; ++c) want[r * cols + c] = x[r * cols + c] * col[r] + mask[(r % period) * cols + c];
      }
      VTPU_CHECK_CLOSE(out, want, 0, 0);
    }
  }

  TEST_CASE("the column count and periods are launch arguments: one program for every [S, S] mask") {
    // scores [heads * S, S] * scale + mask [S, S] (periodic) + bias [S] (a row): programs sized
    // for 512 columns and 64 rows, launched for S from 8 to 200.
    kernels::ElementwiseSpec spec;
    spec.rows = 64;
    spec.cols = 512;
    spec.inputs = {{DType::F32, Layout::Full}, {DType::F32, Layout::Periodic}, {DType::F32, Layout::Row}, {DType::F32, Layout::Scalar}};
    spec.outputs = {DType::F32};
    auto& e = spec.expr;
    e.add_output(e.binary(ExprOp::Add,
                          e.binary(ExprOp::Add, e.binary(ExprOp::Mul, e.input(0, ValueType::F32), e.input(3, ValueType::F32)),
                                   e.input(1, ValueType::F32)),
                          e.input(2, ValueType::F32)));
    for (int64_t seq : {8, 24, 40, 200}) {
      for (int64_t heads : {1, 3}) {
        CAPTURE(seq);
        CAPTURE(heads);
        const int64_t rows = heads * seq, cols = seq;
        spec.inputs[1].period_rows = seq;
        const auto x = testing::random_floats(rows * cols, 20), mask = testing::random_floats(seq * seq, 21),
                   bias = testing::random_floats(cols, 22), scale = testing::random_floats(1, 23);
        const auto out = run_f32(spec, {x, mask, bias, scale}, nullptr, rows, cols);
        std::vector<double> want(rows * cols);
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t c = 0; c < cols; ++c) {
            want[r * cols + c] = (x[r * cols + c] * scale[0] + mask[(r % seq) * cols + c]) + bias[c];
          }
        }
        VTPU_CHECK_CLOSE(out, want, 0, 0);
      }
    }
    // more columns than one block (2048) holds: several column blocks per row, decided at launch
    kernels::ElementwiseSpec wide = unary_spec(8, 2048, ExprOp::Neg);
    const auto x = testing::random_floats(5 * 3000, 24);
    const auto out = run_f32(wide, {x}, nullptr, 5, 3000);
    std::vector<double> want(x.size());
    for (size_t i = 0; i < x.size(); ++i) want[i] = -x[i];
    VTPU_CHECK_CLOSE(out, want, 0, 0);
    // a period that is not a multiple of 8 rows is refused before launch
    spec.inputs[1].period_rows = 12;
    CHECK_THROWS_WITH_AS(kernels::stream_scalars(24, 12, spec.inputs), doctest::Contains("multiple of 8"), kernels::KernelError);
  }

  TEST_CASE("unary ops against double-precision references") {
    struct Case {
      ExprOp op;
      std::function<double(double)> ref;
      float lo, hi;
      double atol, rtol;  // f32 ops: a few ulp; erf-based gelu: the 1.5e-7 approximation error of erf
    };
    const std::vector<Case> cases = {
        {ExprOp::Neg, [](double x) { return -x; }, -5, 5, 0, 0},
        {ExprOp::Abs, [](double x) { return std::fabs(x); }, -5, 5, 0, 0},
        {ExprOp::Exp, [](double x) { return std::exp(x); }, -20, 20, 0, 1e-6},
        {ExprOp::Log, [](double x) { return std::log(x); }, 1e-3f, 100, 1e-6, 1e-6},
        {ExprOp::Tanh, [](double x) { return std::tanh(x); }, -8, 8, 1e-7, 1e-6},
        {ExprOp::Sigmoid, [](double x) { return 1 / (1 + std::exp(-x)); }, -30, 30, 1e-7, 1e-6},
        {ExprOp::Relu, [](double x) { return x > 0 ? x : 0; }, -5, 5, 0, 0},
        {ExprOp::GeluErf, gelu_ref, -6, 6, 1e-6, 1e-5},
        {ExprOp::Erf, [](double x) { return std::erf(x); }, -4, 4, 5e-7, 1e-6},  // 1.5e-7 + cancellation near 0
        // Cephes' polynomials are good to ~1 ulp on |r| <= pi/4; range reduction adds ~|x| * 2^-24 * (pi/2 split error)
        {ExprOp::Sin, [](double x) { return std::sin(x); }, -100, 100, 5e-7, 0},
        {ExprOp::Cos, [](double x) { return std::cos(x); }, -100, 100, 5e-7, 0},
        {ExprOp::Sin, [](double x) { return std::sin(x); }, -4000, 4000, 2e-6, 0},  // RoPE angles: positions x freqs
        {ExprOp::GeluTanh, gelu_tanh_ref, -6, 6, 1e-6, 1e-5},
        {ExprOp::Silu, [](double x) { return x / (1 + std::exp(-x)); }, -20, 20, 1e-6, 1e-6},
        {ExprOp::Sqrt, [](double x) { return std::sqrt(x); }, 0, 100, 0, 1e-6},
        {ExprOp::Rsqrt, [](double x) { return 1 / std::sqrt(x); }, 1e-2f, 100, 0, 1e-6},
        {ExprOp::Reciprocal, [](double x) { return 1 / x; }, 0.1f, 10, 0, 1e-6},
        {ExprOp::Square, [](double x) { return x * x; }, -5, 5, 0, 1e-7},
    };
    for (const auto& c : cases) {
      CAPTURE(kernels::expr_op_name(c.op));
      const auto spec = unary_spec(9, 131, c.op);
      const auto x = testing::random_floats(9 * 131, 7, c.lo, c.hi);
      const auto y = run_f32(spec, {x});
      std::vector<double> want(x.size());
      for (size_t i = 0; i < x.size(); ++i) want[i] = c.ref(x[i]);
      VTPU_CHECK_CLOSE(y, want, c.atol, c.rtol);
    }
  }

  TEST_CASE("sin and cos at any magnitude: the exact reduction past 2^23") {
    // Every binade from 2^-10 to 2^127, both signs, against the double result of each f32 input.
    std::vector<float> x = testing::random_floats(9 * 131, 11, 0.5f, 1.f);
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::ldexp(x[i], static_cast<int>(i % 138) - 10) * (i % 2 ? -1.f : 1.f);
    x[0] = 8388608.f, x[1] = 1e9f, x[2] = 3.4e38f, x[3] = 123456789.f, x[4] = INFINITY, x[5] = NAN;
    for (const bool cosine : {false, true}) {
      const auto y = run_f32(unary_spec(9, 131, cosine ? ExprOp::Cos : ExprOp::Sin), {x});
      CHECK((std::isnan(y[4]) && std::isnan(y[5])));
      for (size_t i = 0; i < x.size(); ++i) {
        if (i != 4 && i != 5) CHECK(std::fabs(y[i] - (cosine ? std::cos(double(x[i])) : std::sin(double(x[i])))) < 3e-7);
      }
    }
  }

  TEST_CASE("special values: sqrt(0), sqrt(-1), relu(NaN), exp overflow") {
    const std::vector<float> x = {0.f, -1.f, NAN, 100.f, INFINITY, -INFINITY, -0.f, 1.f};
    const auto sq = run_f32(unary_spec(1, 8, ExprOp::Sqrt), {x});
    CHECK(sq[0] == 0.f);
    CHECK(std::isnan(sq[1]));
    CHECK(sq[4] == INFINITY);
    const auto r = run_f32(unary_spec(1, 8, ExprOp::Relu), {x});
    CHECK(std::isnan(r[2]));
    CHECK(r[5] == 0.f);
    const auto ex = run_f32(unary_spec(1, 8, ExprOp::Exp), {x});
    CHECK(ex[3] == INFINITY);
    CHECK(ex[5] == 0.f);
  }

  TEST_CASE("pow: integer exponents are exact for negative bases, others go through exp/log") {
    for (double p : {2.0, 3.0, -2.0, 0.5, 1.7}) {
      CAPTURE(p);
      kernels::ElementwiseSpec spec;
      spec.rows = 4;
      spec.cols = 200;
      spec.inputs = {{DType::F32, Layout::Full}};
      spec.outputs = {DType::F32};
      auto& e = spec.expr;
      e.add_output(e.binary(ExprOp::Pow, e.input(0, ValueType::F32), e.constant(p)));
      const bool integer = p == std::round(p);
      const auto x = testing::random_floats(800, 8, integer ? -3.f : 0.1f, 3.f);
      const auto y = run_f32(spec, {x});
      std::vector<double> want(x.size());
      for (size_t i = 0; i < x.size(); ++i) want[i] = std::pow(double(x[i]), p);
      VTPU_CHECK_CLOSE(y, want, 1e-6, 4e-6);
    }
  }

  TEST_CASE("comparisons, where and a bool output") {
    const int64_t n = 1000;
    kernels::ElementwiseSpec spec;
    spec.rows = 1;
    spec.cols = n;
    spec.inputs = {{DType::F32, Layout::Full}, {DType::F32, Layout::Full}};
    spec.outputs = {DType::F32, DType::Bool};
    auto& e = spec.expr;
    const int a = e.input(0, ValueType::F32), b = e.input(1, ValueType::F32);
    const int gt = e.binary(ExprOp::Gt, a, b);
    e.add_output(e.where(gt, a, e.unary(ExprOp::Neg, b)));
    e.add_output(e.binary(ExprOp::Or, e.binary(ExprOp::Le, a, e.constant(-1)), e.binary(ExprOp::Eq, b, b)));
    auto x = testing::random_floats(n, 9), y = testing::random_floats(n, 10);
    y[3] = NAN;  // NaN == NaN is false, so out1[3] depends on a <= -1 only
    const auto program = kernels::make_elementwise(spec, v5e());
    auto out = testing::run_program(program, {testing::Arg::buf(testing::HostBuffer::of(x)), testing::Arg::buf(testing::HostBuffer::of(y)),
                                              testing::Arg::buf(testing::HostBuffer::of(std::vector<float>(n))),
                                              testing::Arg::buf(testing::HostBuffer::of(std::vector<uint8_t>(n))),
                                              testing::Arg::val(int32_t(spec.rows)), testing::Arg::val(int32_t(spec.cols))});
    const auto sel = out.buffers[2].as<float>();
    const auto flag = out.buffers[3].as<uint8_t>();
    for (int64_t i = 0; i < n; ++i) {
      CAPTURE(i);
      const float want = x[i] > y[i] ? x[i] : -y[i];
      CHECK((sel[i] == want || (std::isnan(sel[i]) && std::isnan(want))));
      CHECK(flag[i] == ((x[i] <= -1 || y[i] == y[i]) ? 1 : 0));
    }
  }

  TEST_CASE("bf16 in, bf16 out: widened exactly, rounded to nearest even once") {
    const auto [a, b, c] = narrow_float_product(DType::BF16, sim::f32_to_bf16_bits, -3, 3);
    for (size_t i = 0; i < a.size(); ++i) {
      CAPTURE(i);
      CHECK(c[i] == sim::f32_to_bf16_bits(sim::bf16_bits_to_f32(a[i]) * b[i]));
    }
  }

  TEST_CASE("f16 in, f16 out: widened exactly, rounded to nearest even once, overflow to inf") {
    const auto [a, b, c] = narrow_float_product(DType::F16, sim::f32_to_f16_bits, -300, 300);
    int overflowed = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      CAPTURE(i);
      CHECK(c[i] == sim::f32_to_f16_bits(sim::f16_bits_to_f32(a[i]) * b[i]));
      overflowed += (c[i] & 0x7fff) == 0x7c00;
    }
    CHECK(overflowed > 0);  // products past 65504 are inf, as torch's f16 results are
  }

  TEST_CASE("int32 arithmetic stays exact past 2^24; int8 keeps the low byte") {
    const int64_t n = 300;
    kernels::ElementwiseSpec spec;
    spec.rows = 3;
    spec.cols = 100;
    spec.inputs = {{DType::I32, Layout::Full}, {DType::I32, Layout::Full}};
    spec.outputs = {DType::I32, DType::I8, DType::Bool};
    auto& e = spec.expr;
    const int a = e.input(0, ValueType::I32), b = e.input(1, ValueType::I32);
    const int prod = e.binary(ExprOp::Mul, a, b);
    e.add_output(e.binary(ExprOp::Sub, e.binary(ExprOp::Max, prod, a), b));
    e.add_output(e.binary(ExprOp::Add, a, b));
    e.add_output(e.binary(ExprOp::Ge, a, b));
    std::mt19937 rng(13);
    std::uniform_int_distribution<int32_t> d(-40000, 40000);
    std::vector<int32_t> x(n), y(n);
    for (auto& v : x) v = d(rng) * 3;
    for (auto& v : y) v = d(rng);
    y[0] = x[0];
    auto out = testing::run_program(kernels::make_elementwise(spec, v5e()),
                                    {testing::Arg::buf(testing::HostBuffer::of(x)), testing::Arg::buf(testing::HostBuffer::of(y)),
                                     testing::Arg::buf(testing::HostBuffer::of(std::vector<int32_t>(n))),
                                     testing::Arg::buf(testing::HostBuffer::of(std::vector<int8_t>(n))),
                                     testing::Arg::buf(testing::HostBuffer::of(std::vector<uint8_t>(n))),
                                     testing::Arg::val(int32_t(spec.rows)), testing::Arg::val(int32_t(spec.cols))});
    const auto r = out.buffers[2].as<int32_t>();
    const auto s = out.buffers[3].as<int8_t>();
    const auto ge = out.buffers[4].as<uint8_t>();
    for (int64_t i = 0; i < n; ++i) {
      CAPTURE(i);
      const int64_t p = int64_t(x[i]) * y[i];  // |p| < 2^33: wrap to 32 bits like the VPU
      const int32_t wrapped = static_cast<int32_t>(static_cast<uint32_t>(p));
      CHECK(r[i] == static_cast<int32_t>(static_cast<uint32_t>(std::max(wrapped, x[i])) - static_cast<uint32_t>(y[i])));
      CHECK(s[i] == static_cast<int8_t>(static_cast<uint8_t>(static_cast<uint32_t>(x[i] + y[i]) & 0xff)));
      CHECK(ge[i] == (x[i] >= y[i] ? 1 : 0));
    }
  }

  TEST_CASE("a large add is memory-bound: at or above the HBM bound, and close to it") {
    kernels::ElementwiseSpec spec;
    spec.rows = 1024;
    spec.cols = 1024;
    spec.inputs = {{DType::F32, Layout::Full}, {DType::F32, Layout::Full}};
    spec.outputs = {DType::F32};
    auto& e = spec.expr;
    e.add_output(e.binary(ExprOp::Add, e.input(0, ValueType::F32), e.input(1, ValueType::F32)));
    const size_t n = 1024 * 1024;
    sim::LaunchResult result;
    run_f32(spec, {std::vector<float>(n, 1.f), std::vector<float>(n, 2.f)}, &result);
    const double bytes = 3.0 * n * 4;
    const double bound_s = bytes / v5e().sustained_hbm_bytes_per_s();
    MESSAGE("add 1024x1024: simulated ", result.summary.seconds() * 1e6, " us, HBM bound ", bound_s * 1e6, " us");
    CHECK(result.summary.hbm_read_bytes + result.summary.hbm_write_bytes == uint64_t(bytes));
    CHECK(result.summary.seconds() >= bound_s);
    // Four tiles per loop iteration and blocks that outlast the HBM latency: within 5% (~1.01x).
    CHECK(result.summary.seconds() <= 1.05 * bound_s);
  }

  TEST_CASE("unsupported dtypes and empty kernels are errors that say why") {
    kernels::ElementwiseSpec spec = unary_spec(2, 2, ExprOp::Exp);
    spec.inputs[0].dtype = DType::I64;
    CHECK_THROWS_WITH_AS(kernels::make_elementwise(spec, v5e()), doctest::Contains("i64 is not supported"),
                         kernels::KernelError);
    spec = unary_spec(2, 2, ExprOp::Exp);
    spec.outputs.clear();
    CHECK_THROWS_AS(kernels::make_elementwise(spec, v5e()), kernels::KernelError);
  }
}
