// The exact int32 scan (kernels/compose/cumsum.h: byte planes, one bf16 pass each) on the simulator
// against a wrapping int32 running sum: the int32 extremes, sums that wrap many times, odd
// lengths along either dim; and the longest exact scan's limit.
#include <doctest/doctest.h>

#include <bit>
#include <cstdint>
#include <random>

#include "kernels/compose/cumsum.h"
#include "kernels/graph/plan.h"
#include "support/run_graph.h"

using namespace vtpu;
using kernels::DType;

namespace {

// x [rows, n] scanned along `dim` on the chip; int32 words carried in the f32 buffers bit for bit.
std::vector<int32_t> run_scan(const std::vector<int32_t>& x, int64_t rows, int64_t n, int64_t dim) {
  kernels::Graph g;
  const int in = g.input({{rows, n}, DType::I32}, "x");
  g.mark_output(kernels::cumsum_int32(g, in, dim));
  kernels::ProgramCache cache;
  const auto plan = kernels::make_plan(g, kernels::FusionStrategy::Greedy, sim::load_chip("v5e"), cache);
  std::vector<float> bits(x.size());
  for (size_t i = 0; i < x.size(); ++i) bits[i] = std::bit_cast<float>(x[i]);
  std::vector<int32_t> out;
  for (float f : testing::run_graph(g, plan, {{in, bits}})) out.push_back(std::bit_cast<int32_t>(f));
  return out;
}

// torch's int32 cumsum: a running sum modulo 2^32
std::vector<int32_t> reference(const std::vector<int32_t>& x, int64_t rows, int64_t n, int64_t dim) {
  std::vector<int32_t> out(x.size());
  const int64_t lines = dim == 1 ? rows : n, length = dim == 1 ? n : rows;
  for (int64_t l = 0; l < lines; ++l) {
    uint32_t sum = 0;
    for (int64_t i = 0; i < length; ++i) {
      const int64_t at = dim == 1 ? l * n + i : i * n + l;
      sum += static_cast<uint32_t>(x[at]);
      out[at] = static_cast<int32_t>(sum);
    }
  }
  return out;
}

}  // namespace

TEST_SUITE("kernels") {
  TEST_CASE("cumsum_int32: exact over the whole int32 range, wrapping as torch") {
    std::mt19937 rng(7);
    std::uniform_int_distribution<int32_t> any(INT32_MIN, INT32_MAX);
    for (auto [rows, n] : {std::pair<int64_t, int64_t>{1, 1}, {1, 7}, {3, 129}, {7, 1000}}) {
      std::vector<int32_t> x(rows * n);
      for (auto& v : x) v = any(rng);
      x[0] = INT32_MAX;
      if (x.size() > 2) x[1] = INT32_MAX, x[2] = INT32_MIN;
      for (int64_t dim : {0, 1}) {
        CAPTURE(rows);
        CAPTURE(n);
        CAPTURE(dim);
        CHECK(run_scan(x, rows, n, dim) == reference(x, rows, n, dim));
      }
    }
  }

  TEST_CASE("cumsum_int32: refuses scans longer than f32 holds byte sums exactly, and non-int32 values") {
    kernels::Graph g;
    const int long_rows = g.input({{2, kernels::kMaxExactByteSum + 1}, DType::I32}, "x");
    CHECK_THROWS_WITH_AS(kernels::cumsum_int32(g, long_rows, 1), doctest::Contains("stay exact in f32 up to 65793"),
                         kernels::KernelError);
    const int floats = g.input({{2, 3}, DType::F32}, "y");
    CHECK_THROWS_WITH_AS(kernels::cumsum_int32(g, floats, 1), doctest::Contains("takes int32 values"), kernels::KernelError);
  }
}
