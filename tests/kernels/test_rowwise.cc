// Row-wise kernels (reductions along the last axis, softmax, norms) against double-precision
// host references, over ragged row lengths, with prologues and bf16 outputs.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/generators/elementwise.h"
#include "kernels/generators/rowwise.h"
#include "sim/bf16.h"
#include "support/numerics.h"
#include "support/run_program.h"

using namespace vtpu;
using kernels::DType;
using kernels::ExprOp;
using kernels::Layout;
using kernels::RowOp;
using kernels::ValueType;

namespace {

kernels::RowwiseSpec row_spec(int64_t rows, int64_t cols, RowOp op) {
  kernels::RowwiseSpec s;
  s.rows = rows;
  s.cols = cols;
  s.op = op;
  s.inputs = {{DType::F32, Layout::Full}};
  return s;
}

// `rows`, `cols`: the shape passed at launch (default spec.rows x spec.cols, the shape the blocks
// were sized for).
std::vector<float> run(const kernels::RowwiseSpec& spec, const std::vector<std::vector<float>>& inputs, int64_t rows = 0,
                       int64_t cols = 0) {
  if (rows == 0) rows = spec.rows;
  if (cols == 0) cols = spec.cols;
  std::vector<testing::Arg> args;
  for (const auto& in : inputs) args.push_back(testing::Arg::buf(testing::HostBuffer::of(in)));
  const size_t n = kernels::row_op_reduces(spec.op) ? rows : rows * cols;
  const int eb = spec.out_dtype == DType::BF16 ? 2 : 4;
  args.push_back(testing::Arg::buf(testing::HostBuffer{std::vector<uint8_t>(n * eb)}));
  for (int32_t v : kernels::stream_scalars(rows, cols, spec.inputs)) args.push_back(testing::Arg::val(v));
  auto out = testing::run_program(kernels::make_rowwise(spec, sim::load_chip("v5e")), args);
  const auto& result = out.buffers[inputs.size()];
  if (spec.out_dtype == DType::F32) return result.as<float>();
  std::vector<float> v;
  for (uint16_t b : result.as<uint16_t>()) v.push_back(sim::bf16_bits_to_f32(b));
  return v;
}

// Per-row reference of a reduction over x.
std::vector<double> reduce_rows(const std::vector<float>& x, int64_t rows, int64_t cols, RowOp op, int64_t correction = 1) {
  std::vector<double> out(rows);
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = &x[r * cols];
    double sum = 0, mx = -INFINITY, mn = INFINITY;
    bool nan = false;
    for (int64_t c = 0; c < cols; ++c) {
      sum += row[c];
      nan |= std::isnan(row[c]);
      mx = std::max<double>(mx, row[c]);
      mn = std::min<double>(mn, row[c]);
    }
    const double mean = sum / cols;
    double sq = 0;
    for (int64_t c = 0; c < cols; ++c) sq += (row[c] - mean) * (row[c] - mean);
    switch (op) {
      case RowOp::Sum: out[r] = sum; break;
      case RowOp::Mean: out[r] = mean; break;
      case RowOp::Max: out[r] = nan ? NAN : mx; break;
      case RowOp::Min: out[r] = nan ? NAN : mn; break;
      case RowOp::Var: out[r] = sq / double(cols - correction); break;
      default: break;
    }
  }
  return out;
}

}  // namespace

TEST_SUITE("kernels") {
  TEST_CASE("row reductions over ragged row lengths") {
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 1}, {7, 129}, {33, 1000}, {300, 128}, {9, 5000}}) {
      for (RowOp op : {RowOp::Sum, RowOp::Mean, RowOp::Max, RowOp::Min, RowOp::Var}) {
        if (op == RowOp::Var && cols == 1) continue;
        CAPTURE(rows);
        CAPTURE(cols);
        CAPTURE(kernels::row_op_name(op));
        const auto x = testing::random_floats(rows * cols, 41);
        const auto got = run(row_spec(rows, cols, op), {x});
        // f32 sums of n terms in tree order: within n * 2^-24 * sum|x| (|x| <= 3 here).
        const double atol = (op == RowOp::Max || op == RowOp::Min) ? 0 : 3.0 * cols * std::ldexp(1.0, -23) + 1e-6;
        VTPU_CHECK_CLOSE(got, reduce_rows(x, rows, cols, op), atol, 1e-6);
      }
    }
  }

  TEST_CASE("row products over ragged row lengths; zeros, signs and NaN") {
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 1}, {7, 129}, {33, 1000}, {9, 7}}) {
      CAPTURE(rows);
      CAPTURE(cols);
      auto x = testing::random_floats(rows * cols, 43, -1.1f, 1.1f);
      for (auto& v : x) v = v < 0 ? v - 0.5f : v + 0.5f;  // |v| in [0.5, 1.6]: products of 1000 stay finite
      x[0] = rows > 1 ? 0.f : x[0];  // row 0 holds a zero
      if (rows > 2) x[2 * cols] = std::numeric_limits<float>::quiet_NaN();
      std::vector<double> want(rows);
      for (int64_t r = 0; r < rows; ++r) {
        double p = 1;
        for (int64_t c = 0; c < cols; ++c) p *= x[r * cols + c];
        want[r] = p;
      }
      // each of the n - 1 products rounds once in f32: within n * 2^-24 relative
      const auto got = run(row_spec(rows, cols, RowOp::Prod), {x});
      for (int64_t r = 0; r < rows; ++r) {
        CAPTURE(r);
        if (std::isnan(want[r])) {
          CHECK(std::isnan(got[r]));
        } else {
          CHECK(std::abs(got[r] - want[r]) <= std::abs(want[r]) * double(cols) * std::ldexp(1.0, -24) + 1e-30);
        }
      }
    }
  }

  TEST_CASE("the row count is a launch argument: one program per row width, any number of rows") {
    const int64_t cols = 700;
    for (RowOp op : {RowOp::Mean, RowOp::Max}) {  // a Column output: its DMA follows the launch's rows
      CAPTURE(kernels::row_op_name(op));
      const auto spec = row_spec(64, cols, op);
      for (int64_t rows : {1, 13, 64, 3000}) {  // fewer rows than sized; one block; many blocks
        CAPTURE(rows);
        const auto x = testing::random_floats(rows * cols, 45);
        const double atol = op == RowOp::Max ? 0 : 3.0 * cols * std::ldexp(1.0, -23) + 1e-6;
        VTPU_CHECK_CLOSE(run(spec, {x}, rows), reduce_rows(x, rows, cols, op), atol, 1e-6);
      }
    }
  }

  TEST_CASE("the column count is a launch argument: one program per power of two of row widths") {
    // softmax over [heads * S, S] scores, mean and var over rows: programs sized for 512 columns
    // serve every width up to 512; the mean divides by the launch's count.
    for (RowOp op : {RowOp::Softmax, RowOp::Mean, RowOp::Var, RowOp::Max}) {
      CAPTURE(kernels::row_op_name(op));
      const auto spec = row_spec(64, 512, op);
      for (int64_t cols : {2, 7, 129, 300, 512}) {
        CAPTURE(cols);
        const int64_t rows = 40;
        const auto x = testing::random_floats(rows * cols, 46);
        const auto got = run(spec, {x}, rows, cols);
        if (op == RowOp::Softmax) {
          std::vector<double> want(rows * cols);
          for (int64_t r = 0; r < rows; ++r) {
            double m = -1e300, sum = 0;
            for (int64_t c = 0; c < cols; ++c) m = std::max(m, double(x[r * cols + c]));
            for (int64_t c = 0; c < cols; ++c) sum += std::exp(x[r * cols + c] - m);
            for (int64_t c = 0; c < cols; ++c) want[r * cols + c] = std::exp(x[r * cols + c] - m) / sum;
          }
          VTPU_CHECK_CLOSE(got, want, 1e-6, 1e-5);
        } else {
          const double atol = op == RowOp::Max ? 0 : 3.0 * cols * std::ldexp(1.0, -23) + 1e-6;
          VTPU_CHECK_CLOSE(got, reduce_rows(x, rows, cols, op), atol, 1e-6);
        }
      }
    }
    // layer_norm with a [cols] weight and bias, sized for 256, launched for 200
    auto ln = row_spec(16, 256, RowOp::LayerNorm);
    ln.has_weight = ln.has_bias = true;
    const int64_t rows = 10, cols = 200;
    const auto x = testing::random_floats(rows * cols, 47), w = testing::random_floats(cols, 48), b = testing::random_floats(cols, 49);
    std::vector<double> want(rows * cols);
    for (int64_t r = 0; r < rows; ++r) {
      double mean = 0, var = 0;
      for (int64_t c = 0; c < cols; ++c) mean += x[r * cols + c];
      mean /= cols;
      for (int64_t c = 0; c < cols; ++c) var += (x[r * cols + c] - mean) * (x[r * cols + c] - mean);
      const double inv = 1 / std::sqrt(var / cols + ln.eps);
      for (int64_t c = 0; c < cols; ++c) want[r * cols + c] = (x[r * cols + c] - mean) * inv * w[c] + b[c];
    }
    VTPU_CHECK_CLOSE(run(ln, {x, w, b}, rows, cols), want, 1e-5, 1e-5);
    // var over fewer columns than its correction: inf or NaN, as torch gives
    const auto var = run(row_spec(8, 128, RowOp::Var), {testing::random_floats(8, 50)}, 8, 1);
    for (float v : var) CHECK(!std::isfinite(v));
  }

  TEST_CASE("whole-chunk row kernels mask nothing and need a multiple of 128 columns") {
    auto spec = row_spec(64, 256, RowOp::Sum);
    spec.whole_chunks = true;
    const auto x = testing::random_floats(64 * 256, 51);
    VTPU_CHECK_CLOSE(run(spec, {x}), reduce_rows(x, 64, 256, RowOp::Sum), 3.0 * 256 * std::ldexp(1.0, -23) + 1e-6, 1e-6);
    spec.cols = 200;
    CHECK_THROWS_WITH_AS(kernels::make_rowwise(spec, sim::load_chip("v5e")), doctest::Contains("multiple of 128"), kernels::KernelError);
  }

  TEST_CASE("max propagates NaN; var with correction 0") {
    auto x = testing::random_floats(3 * 200, 42);
    x[250] = NAN;
    const auto mx = run(row_spec(3, 200, RowOp::Max), {x});
    CHECK(!std::isnan(mx[0]));
    CHECK(std::isnan(mx[1]));
    auto spec = row_spec(3, 200, RowOp::Var);
    spec.correction = 0;
    x[250] = 0.5f;
    VTPU_CHECK_CLOSE(run(spec, {x}), reduce_rows(x, 3, 200, RowOp::Var, 0), 1e-5, 1e-5);
  }

  TEST_CASE("sum with a prologue: sum((a - b)^2) in one kernel") {
    const int64_t rows = 10, cols = 300;
    auto spec = row_spec(rows, cols, RowOp::Sum);
    spec.inputs = {{DType::F32, Layout::Full}, {DType::BF16, Layout::Full}};
    kernels::Expr e;
    const int d = e.binary(ExprOp::Sub, e.input(0, ValueType::F32), e.input(1, ValueType::F32));
    e.add_output(e.unary(ExprOp::Square, d));
    spec.prologue = e;
    const auto a = testing::random_floats(rows * cols, 43), bf = testing::random_floats(rows * cols, 44);
    std::vector<uint16_t> b(bf.size());
    std::vector<double> want(rows, 0);
    for (size_t i = 0; i < bf.size(); ++i) {
      b[i] = sim::f32_to_bf16_bits(bf[i]);
      const double diff = a[i] - sim::bf16_bits_to_f32(b[i]);
      want[i / cols] += diff * diff;
    }
    auto out = testing::run_program(kernels::make_rowwise(spec, sim::load_chip("v5e")),
                                    {testing::Arg::buf(testing::HostBuffer::of(a)), testing::Arg::buf(testing::HostBuffer::of(b)),
                                     testing::Arg::buf(testing::HostBuffer::of(std::vector<float>(rows))),
                                     testing::Arg::val(int32_t(rows)), testing::Arg::val(int32_t(cols))});
    VTPU_CHECK_CLOSE(out.buffers[2].as<float>(), want, 1e-4, 1e-5);
  }

  TEST_CASE("softmax and log_softmax of x * scale + mask (attention scores)") {
    const int64_t rows = 20, cols = 300;
    for (RowOp op : {RowOp::Softmax, RowOp::LogSoftmax}) {
      CAPTURE(kernels::row_op_name(op));
      auto spec = row_spec(rows, cols, op);
      spec.inputs = {{DType::F32, Layout::Full}, {DType::F32, Layout::Full}, {DType::F32, Layout::Scalar}};
      kernels::Expr e;
      e.add_output(e.binary(ExprOp::Add, e.binary(ExprOp::Mul, e.input(0, ValueType::F32), e.input(2, ValueType::F32)),
                            e.input(1, ValueType::F32)));
      spec.prologue = e;
      const auto x = testing::random_floats(rows * cols, 45, -10, 10);
      std::vector<float> mask(rows * cols, 0.f);
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = r + 1; c < cols; ++c) mask[r * cols + c] = -std::numeric_limits<float>::infinity();
      }
      const std::vector<float> scale = {0.125f};
      const auto got = run(spec, {x, mask, scale});
      std::vector<double> want(rows * cols);
      for (int64_t r = 0; r < rows; ++r) {
        double m = -INFINITY, s = 0;
        for (int64_t c = 0; c < cols; ++c) m = std::max(m, double(x[r * cols + c]) * 0.125 + mask[r * cols + c]);
        for (int64_t c = 0; c < cols; ++c) s += std::exp(double(x[r * cols + c]) * 0.125 + mask[r * cols + c] - m);
        for (int64_t c = 0; c < cols; ++c) {
          const double z = double(x[r * cols + c]) * 0.125 + mask[r * cols + c] - m;
          want[r * cols + c] = op == RowOp::Softmax ? std::exp(z) / s : z - std::log(s);
        }
      }
      VTPU_CHECK_CLOSE(got, want, 1e-6, 1e-5);
    }
  }

  TEST_CASE("layer_norm with weight and bias, rms_norm with weight, bf16 out") {
    const int64_t rows = 17, cols = 200;
    const auto x = testing::random_floats(rows * cols, 46, -4, 6);
    const auto w = testing::random_floats(cols, 47), b = testing::random_floats(cols, 48);
    for (RowOp op : {RowOp::LayerNorm, RowOp::RmsNorm}) {
      for (DType out : {DType::F32, DType::BF16}) {
        CAPTURE(kernels::row_op_name(op));
        CAPTURE(kernels::dtype_name(out));
        auto spec = row_spec(rows, cols, op);
        spec.has_weight = true;
        spec.has_bias = op == RowOp::LayerNorm;
        spec.out_dtype = out;
        spec.eps = 1e-5;
        std::vector<std::vector<float>> inputs = {x, w};
        if (spec.has_bias) inputs.push_back(b);
        const auto got = run(spec, inputs);
        std::vector<double> want(rows * cols);
        for (int64_t r = 0; r < rows; ++r) {
          double mean = 0, sq = 0;
          for (int64_t c = 0; c < cols; ++c) mean += x[r * cols + c];
          mean /= cols;
          const double center = op == RowOp::LayerNorm ? mean : 0;
          for (int64_t c = 0; c < cols; ++c) sq += (x[r * cols + c] - center) * (x[r * cols + c] - center);
          const double inv = 1 / std::sqrt(sq / cols + 1e-5);
          for (int64_t c = 0; c < cols; ++c) {
            want[r * cols + c] = (x[r * cols + c] - center) * inv * w[c] + (spec.has_bias ? b[c] : 0);
          }
        }
        VTPU_CHECK_CLOSE(got, want, 1e-5, out == DType::BF16 ? 1.0 / 256 : 1e-5);
      }
    }
  }

  TEST_CASE("row kernel errors") {
    auto spec = row_spec(2, 2, RowOp::Sum);
    spec.has_weight = true;
    CHECK_THROWS_WITH_AS(kernels::make_rowwise(spec, sim::load_chip("v5e")), doctest::Contains("layer_norm"),
                         kernels::KernelError);
    spec = row_spec(2, 1 << 20, RowOp::Softmax);
    CHECK_THROWS_WITH_AS(kernels::make_rowwise(spec, sim::load_chip("v5e")), doctest::Contains("exceed"), kernels::KernelError);
  }
}

TEST_SUITE("kernels") {
  TEST_CASE("the fusion planner's operand caps fit the kernels' scalar registers") {
    // The planner grows groups up to these caps; a kernel at a cap must still generate (the
    // launch's shape and block sizing hold scalar registers too).
    const auto chip = sim::load_chip("v5e");
    const auto sum_of = [](kernels::Expr& e, size_t n) {
      int acc = e.input(0, kernels::ValueType::F32);
      for (size_t i = 1; i < n; ++i) acc = e.binary(kernels::ExprOp::Add, acc, e.input(int(i), kernels::ValueType::F32));
      return acc;
    };
    kernels::ElementwiseSpec ew;
    ew.rows = 64;
    ew.cols = 300;
    ew.inputs.assign(kernels::kMaxElementwiseOperands - 1, {DType::F32, kernels::Layout::Full});
    ew.inputs.back().layout = kernels::Layout::Periodic;
    ew.outputs = {DType::F32};
    ew.expr.add_output(sum_of(ew.expr, ew.inputs.size()));
    CHECK_NOTHROW(kernels::make_elementwise(ew, chip));
    kernels::RowwiseSpec row;
    row.rows = 64;
    row.cols = 300;
    row.op = kernels::RowOp::LayerNorm;
    row.has_weight = row.has_bias = true;
    row.inputs.assign(kernels::kMaxRowOperands - 3, {DType::F32, kernels::Layout::Full});
    row.inputs.back().layout = kernels::Layout::Periodic;
    kernels::Expr e;
    e.add_output(sum_of(e, row.inputs.size()));
    row.prologue = e;
    CHECK_NOTHROW(kernels::make_rowwise(row, chip));
  }
}
