// Reductions over the leading axis (kernels/column_reduce): sums, means, maxima and minima of
// every column over ragged row blocks and strips, bf16 in and out, against double references;
// its time against the HBM bound.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "kernels/codegen/asm_writer.h"
#include "kernels/generators/column_reduce.h"
#include "sim/bf16.h"
#include "support/numerics.h"
#include "support/run_program.h"

using namespace vtpu;
using kernels::DType;
using kernels::RowOp;

namespace {

struct Run {
  std::vector<float> out;
  sim::LaunchResult launch;
};

Run run(const kernels::ColumnReduceSpec& spec, const std::vector<float>& x, int64_t rows, int64_t cols, const std::string& chip = "v5e") {
  std::vector<testing::Arg> args;
  if (spec.in_dtype == DType::BF16) {
    std::vector<uint16_t> b(x.size());
    for (size_t i = 0; i < x.size(); ++i) b[i] = sim::f32_to_bf16_bits(x[i]);
    args.push_back(testing::Arg::buf(testing::HostBuffer::of(b)));
  } else {
    args.push_back(testing::Arg::buf(testing::HostBuffer::of(x)));
  }
  const int ebo = spec.out_dtype == DType::BF16 ? 2 : 4;
  args.push_back(testing::Arg::buf(testing::HostBuffer{std::vector<uint8_t>(cols * ebo)}));
  for (int32_t v : kernels::column_reduce_scalars(spec, rows, cols)) args.push_back(testing::Arg::val(v));
  auto out = testing::run_program(kernels::make_column_reduce(spec, sim::load_chip(chip)), args, chip);
  Run r{{}, out.result};
  if (spec.out_dtype == DType::F32) {
    r.out = out.buffers[1].as<float>();
  } else {
    for (uint16_t b : out.buffers[1].as<uint16_t>()) r.out.push_back(sim::bf16_bits_to_f32(b));
  }
  return r;
}

std::vector<double> reference(const std::vector<float>& x, int64_t rows, int64_t cols, RowOp op, bool bf16_in) {
  std::vector<double> out(cols, op == RowOp::Max ? -INFINITY : op == RowOp::Min ? INFINITY : 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const double v = bf16_in ? sim::bf16_bits_to_f32(sim::f32_to_bf16_bits(x[r * cols + c])) : x[r * cols + c];
      out[c] = op == RowOp::Max ? std::max(out[c], v) : op == RowOp::Min ? std::min(out[c], v) : out[c] + v;
    }
  }
  if (op == RowOp::Mean) {
    for (double& v : out) v /= double(rows);
  }
  return out;
}

}  // namespace

TEST_SUITE("kernels") {
  TEST_CASE("column reductions over ragged rows and strips") {
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 1}, {7, 129}, {1000, 7}, {129, 1000}, {3000, 300}, {64, 2500}}) {
      for (RowOp op : {RowOp::Sum, RowOp::Mean, RowOp::Max, RowOp::Min}) {
        CAPTURE(rows);
        CAPTURE(cols);
        CAPTURE(kernels::row_op_name(op));
        kernels::ColumnReduceSpec spec;
        spec.op = op;
        spec.cols = cols;
        const auto x = testing::random_floats(rows * cols, 61);
        // f32 sums of `rows` terms in some order: within rows * 2^-24 * sum|x| (|x| <= 3 here).
        const double atol = (op == RowOp::Max || op == RowOp::Min) ? 0 : 3.0 * rows * std::ldexp(1.0, -23) + 1e-6;
        VTPU_CHECK_CLOSE(run(spec, x, rows, cols).out, reference(x, rows, cols, op, false), atol, 1e-6);
      }
    }
  }

  TEST_CASE("column reductions: bf16 in and out, one program for any shape, NaN propagates") {
    kernels::ColumnReduceSpec spec;
    spec.in_dtype = spec.out_dtype = DType::BF16;
    spec.cols = 512;
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{33, 512}, {200, 40}, {5, 1300}}) {
      CAPTURE(rows);
      CAPTURE(cols);
      const auto x = testing::random_floats(rows * cols, 62);
      // one bf16 rounding of the f32 sum: half an ulp of 8 bits
      VTPU_CHECK_CLOSE(run(spec, x, rows, cols).out, reference(x, rows, cols, RowOp::Sum, true), 3.0 * rows * std::ldexp(1.0, -23),
                       1.0 / 256);
    }
    kernels::ColumnReduceSpec max;
    max.op = RowOp::Max;
    max.cols = 8;
    auto x = testing::random_floats(20 * 8, 63);
    x[13 * 8 + 5] = std::numeric_limits<float>::quiet_NaN();
    const auto got = run(max, x, 20, 8).out;
    CHECK(std::isnan(got[5]));
    CHECK(!std::isnan(got[4]));
  }

  TEST_CASE("column reductions: time near the HBM bound") {
    // A [4096, 1024] f32 sum reads 16 MiB once; each block's reduction overlaps the next block's DMA.
    kernels::ColumnReduceSpec spec;
    spec.cols = 1024;
    const auto chip = sim::load_chip("v5e");
    const auto r = run(spec, testing::random_floats(4096 * 1024, 64), 4096, 1024);
    const double bound = 4096.0 * 1024 * 4 / chip.hbm_bytes_per_cycle();
    MESSAGE("column sum 4096x1024: ", r.launch.cycles, " cycles, HBM bound ", bound);
    CHECK(double(r.launch.cycles) >= bound);
    CHECK(double(r.launch.cycles) <= 1.2 * bound);
  }

  TEST_CASE("column reduce errors") {
    kernels::ColumnReduceSpec spec;
    spec.op = RowOp::Softmax;
    CHECK_THROWS_WITH_AS(kernels::make_column_reduce(spec, sim::load_chip("v5e")), doctest::Contains("not a sum"), kernels::KernelError);
    spec.op = RowOp::Sum;
    spec.in_dtype = DType::I32;
    CHECK_THROWS_WITH_AS(kernels::make_column_reduce(spec, sim::load_chip("v5e")), doctest::Contains("f32, bf16 or f16"), kernels::KernelError);
    spec.in_dtype = DType::F32;
    CHECK_THROWS_WITH_AS(kernels::column_reduce_scalars(spec, 0, 4), doctest::Contains("launch"), kernels::KernelError);
  }
}
