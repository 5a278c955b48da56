// The Pallas-style block kernel generator on the simulator: a blocked matmul with an accumulator
// (pl.when on the K axis) against a host reference, its cycles against the MXUs' bound and its
// HBM traffic against the pipeline's closed form, and the errors it raises.
#include <doctest/doctest.h>

#include <algorithm>
#include <vector>

#include "kernels/codegen/kernel_error.h"
#include "kernels/generators/block_kernel.h"
#include "sim/bf16.h"
#include "support/run_program.h"

using namespace vtpu;
using kernels::BlockRef;
using kernels::BlockStatement;
using kernels::DType;

namespace {

kernels::GridAffine program_id(int axis, int64_t scale = 1) {
  kernels::GridAffine a;
  a.coef[axis] = scale;
  return a;
}

BlockRef array(BlockRef::Kind kind, DType dtype, int64_t rows, int64_t cols, int64_t br, int64_t bc, int row_axis,
               int col_axis) {
  BlockRef r{kind, dtype, rows, cols, br, bc, {program_id(row_axis), program_id(col_axis)}, false};
  return r;
}

// z = x @ y in blocks (bm, bk, bn), grid (m/bm, n/bn, k/bk), an f32 accumulator set on k == 0.
kernels::BlockKernelSpec blocked_matmul(int64_t m, int64_t k, int64_t n, int64_t bm, int64_t bk, int64_t bn) {
  kernels::BlockKernelSpec spec;
  spec.name = "blocked_matmul";
  spec.grid = {m / bm, n / bn, k / bk};
  spec.refs = {array(BlockRef::Kind::Input, DType::BF16, m, k, bm, bk, 0, 2),
               array(BlockRef::Kind::Input, DType::BF16, k, n, bk, bn, 2, 1),
               array(BlockRef::Kind::Output, DType::F32, m, n, bm, bn, 0, 1),
               BlockRef{BlockRef::Kind::Scratch, DType::F32, bm, bn, bm, bn, {}, false}};
  BlockStatement zero;
  zero.kind = BlockStatement::Kind::Assign;
  zero.target = 3;
  zero.expr.add_output(zero.expr.constant(0));
  zero.when = {{program_id(2), true}};  // k == 0
  BlockStatement dot;
  dot.kind = BlockStatement::Kind::Dot;
  dot.target = 3;
  dot.operands = {0, 1};
  dot.accumulate = true;
  BlockStatement out;
  out.kind = BlockStatement::Kind::Assign;
  out.target = 2;
  out.operands = {3};
  out.expr.add_output(out.expr.input(0, kernels::ValueType::F32));
  spec.body = {zero, dot, out};
  return spec;
}

}  // namespace

TEST_CASE("block kernel: a blocked matmul with an accumulator matches the host and the MXU bound") {
  const sim::ChipConfig chip = sim::load_chip("v5e");
  const int64_t m = 256, k = 512, n = 256, bm = 128, bk = 256, bn = 256;
  std::vector<float> x(m * k), y(k * n);
  for (size_t i = 0; i < x.size(); ++i) x[i] = sim::round_to_bf16(float(int(i * 7 % 17) - 8) / 8.0f);
  for (size_t i = 0; i < y.size(); ++i) y[i] = sim::round_to_bf16(float(int(i * 5 % 13) - 6) / 4.0f);
  std::vector<uint16_t> xb(x.size()), yb(y.size());
  for (size_t i = 0; i < x.size(); ++i) xb[i] = sim::f32_to_bf16_bits(x[i]);
  for (size_t i = 0; i < y.size(); ++i) yb[i] = sim::f32_to_bf16_bits(y[i]);
  const std::string source = kernels::make_block_kernel_source(blocked_matmul(m, k, n, bm, bk, bn), chip);
  auto out = testing::run_program(source, {testing::Arg::buf(testing::HostBuffer::of(xb)),
                                           testing::Arg::buf(testing::HostBuffer::of(yb)),
                                           testing::Arg::buf(testing::HostBuffer::of(std::vector<float>(m * n)))});
  const std::vector<float> z = out.buffers[2].as<float>();
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double expected = 0;  // bf16 products are exact, the sums small integers over 32: exact in f32
      for (int64_t p = 0; p < k; ++p) expected += double(x[i * k + p]) * y[p * n + j];
      REQUIRE(z[i * n + j] == doctest::Approx(expected).epsilon(1e-6));
    }
  }
  const double flops_per_cycle = chip.peak_bf16_flops / double(chip.clock_hz);
  CHECK(out.result.cycles >= 2.0 * m * n * k / flops_per_cycle);
  // Both inputs change block at every step (K fastest); each output block is written once.
  const int64_t steps = (m / bm) * (n / bn) * (k / bk);
  CHECK(out.result.summary.hbm_read_bytes == uint64_t(steps * (bm * bk + bk * bn) * 2));
  CHECK(out.result.summary.hbm_write_bytes == uint64_t(m * n * 4));
}

TEST_CASE("block kernel: what the chip cannot hold or run is refused naming the kernel") {
  const sim::ChipConfig chip = sim::load_chip("v5e");
  auto too_big = blocked_matmul(16384, 16384, 16384, 8192, 8192, 8192);
  CHECK_THROWS_WITH_AS(kernels::make_block_kernel_source(too_big, chip),
                       doctest::Contains("kernel 'blocked_matmul': its blocks need"), kernels::KernelError);
  auto ragged = blocked_matmul(256, 512, 256, 128, 256, 256);
  ragged.refs[0].block_cols = 200;
  CHECK_THROWS_WITH_AS(kernels::make_block_kernel_source(ragged, chip), doctest::Contains("blocks are whole 8 x 128 tiles"),
                       kernels::KernelError);
  auto narrow = blocked_matmul(256, 512, 256, 128, 128, 128);
  CHECK_THROWS_WITH_AS(kernels::make_block_kernel_source(narrow, sim::load_chip("v6e")),
                       doctest::Contains("must be whole MXU widths (256) on v6e"), kernels::KernelError);
}

TEST_CASE("block kernel: column sums and row maxima of a block match the host") {
  const int64_t rows = 64, cols = 256;
  const auto fixed = [](BlockRef::Kind kind, int64_t r, int64_t c) {
    return BlockRef{kind, DType::F32, r, c, r, c, {}, false};
  };
  kernels::BlockKernelSpec spec;
  spec.name = "reductions";
  spec.grid = {1};
  spec.refs = {fixed(BlockRef::Kind::Input, rows, cols), fixed(BlockRef::Kind::Output, 1, cols),
               fixed(BlockRef::Kind::Output, rows, 128), fixed(BlockRef::Kind::Scratch, 1, cols),
               fixed(BlockRef::Kind::Scratch, rows, 1)};
  const auto reduce = [](BlockStatement::Kind kind, int target) {
    BlockStatement st;
    st.kind = kind;
    st.target = target;
    st.operands = {0};
    return st;
  };
  const auto copy = [](int target, int from) {  // a row statistic or row vector broadcast into an output
    BlockStatement st;
    st.target = target;
    st.operands = {from};
    st.expr.add_output(st.expr.input(0, kernels::ValueType::F32));
    return st;
  };
  spec.body = {reduce(BlockStatement::Kind::ColumnSum, 3), reduce(BlockStatement::Kind::RowMax, 4), copy(1, 3),
               copy(2, 4)};
  std::vector<float> x(rows * cols);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i * 7919 % 201) - 100);  // small integers: exact sums
  auto out = testing::run_program(kernels::make_block_kernel_source(spec, sim::load_chip("v5e")),
                                  {testing::Arg::buf(testing::HostBuffer::of(x)),
                                   testing::Arg::buf(testing::HostBuffer::of(std::vector<float>(cols))),
                                   testing::Arg::buf(testing::HostBuffer::of(std::vector<float>(rows * 128)))});
  const std::vector<float> sums = out.buffers[1].as<float>(), maxima = out.buffers[2].as<float>();
  for (int64_t j = 0; j < cols; ++j) {
    float expected = 0;
    for (int64_t i = 0; i < rows; ++i) expected += x[i * cols + j];
    REQUIRE(sums[j] == expected);
  }
  for (int64_t i = 0; i < rows; ++i) {
    float expected = x[i * cols];
    for (int64_t j = 1; j < cols; ++j) expected = std::max(expected, x[i * cols + j]);
    for (int64_t l = 0; l < 128; ++l) REQUIRE(maxima[i * 128 + l] == expected);
  }
}
