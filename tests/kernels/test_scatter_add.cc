// The row scatter-add kernel (nn.Embedding's backward): rows of f32 and bf16 sources summed into
// a zeroed table at int32 or int64 indices, with repeated indices, a skipped padding index,
// ragged widths and more indices than one chunk; indices outside the table trap. The same kernel
// combining by max, min or product starts every row at that combine's identity.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "kernels/codegen/asm_writer.h"
#include "kernels/generators/scatter_add.h"
#include "sim/bf16.h"
#include "sim/sim_error.h"
#include "support/run_program.h"

using namespace vtpu;
using kernels::DType;

namespace {

// Runs the kernel on f32 source rows (given as floats; bf16 rounds them on the way in).
std::vector<float> scatter(const std::vector<float>& src, int64_t width, const std::vector<int64_t>& index, int64_t rows,
                           int64_t padding, DType dtype, bool pairs,
                           kernels::ScatterCombine combine = kernels::ScatterCombine::Add) {
  std::vector<testing::Arg> args;
  std::vector<uint16_t> bf;
  if (dtype == DType::BF16) {
    for (float v : src) bf.push_back(sim::f32_to_bf16_bits(v));
    args.push_back(testing::Arg::buf(testing::HostBuffer::of(bf)));
  } else {
    args.push_back(testing::Arg::buf(testing::HostBuffer::of(src)));
  }
  if (pairs) args.push_back(testing::Arg::buf(testing::HostBuffer::of(index)));
  else args.push_back(testing::Arg::buf(testing::HostBuffer::of(std::vector<int32_t>(index.begin(), index.end()))));
  const size_t out_elems = size_t(rows * width);
  args.push_back(testing::Arg::buf(testing::HostBuffer{std::vector<uint8_t>(out_elems * dtype_bytes(dtype), 0xff)}));
  for (int64_t v : {int64_t(index.size()), rows, padding}) args.push_back(testing::Arg::val(int32_t(v)));
  auto out = testing::run_program(kernels::make_scatter_add({dtype, width, pairs, combine}, sim::load_chip("v5e")), args);
  if (dtype == DType::F32) return out.buffers[2].as<float>();
  std::vector<float> f;
  for (uint16_t b : out.buffers[2].as<uint16_t>()) f.push_back(sim::bf16_bits_to_f32(b));
  return f;
}

}  // namespace

TEST_SUITE("kernels") {
  TEST_CASE("scatter-add sums rows into zeros in index order, skipping the padding index") {
    for (bool pairs : {false, true}) {
      for (auto [rows, width, n] : {std::array<int64_t, 3>{1, 1, 3}, {10, 1000, 40}, {300, 7, 600}, {5, 2100, 9}}) {
        CAPTURE(pairs);
        CAPTURE(rows);
        CAPTURE(width);
        std::mt19937 rng(3);
        std::uniform_int_distribution<int64_t> pick(0, rows - 1);
        std::vector<int64_t> index(n);
        for (auto& i : index) i = pick(rng);
        const int64_t padding = rows > 1 ? index[1] : -1;  // every occurrence of it is skipped
        std::vector<float> src(n * width);
        for (size_t k = 0; k < src.size(); ++k) src[k] = float(int(k % 97) - 48) * 0.25f;  // exact sums in f32
        for (DType dtype : {DType::F32, DType::BF16}) {
          const auto got = scatter(src, width, index, rows, padding, dtype, pairs);
          std::vector<double> want(rows * width, 0.0);
          for (int64_t i = 0; i < n; ++i) {
            if (index[i] == padding) continue;
            for (int64_t c = 0; c < width; ++c) {
              double& acc = want[index[i] * width + c];
              acc += src[i * width + c];
              if (dtype == DType::BF16) acc = sim::round_to_bf16(float(acc));  // rounded after each update
            }
          }
          bool same = true;
          for (size_t k = 0; k < want.size() && same; ++k) same = got[k] == float(want[k]);
          CHECK(same);
        }
      }
    }
  }

  TEST_CASE("the scatter combines by max, min or product from the identity, rows untouched keep it") {
    using kernels::ScatterCombine;
    const int64_t rows = 6, width = 300, n = 20;
    std::vector<int64_t> index(n);
    for (int64_t i = 0; i < n; ++i) index[i] = (i * 7) % 5;  // row 5 is never named
    std::vector<float> src(n * width);
    for (size_t k = 0; k < src.size(); ++k) src[k] = float(int(k % 13) - 6) * 0.5f;  // exact products in bf16 too
    for (ScatterCombine combine : {ScatterCombine::Max, ScatterCombine::Min, ScatterCombine::Mul}) {
      for (DType dtype : {DType::F32, DType::BF16}) {
        CAPTURE(int(combine));
        CAPTURE(dtype_name(dtype));
        const float identity = combine == ScatterCombine::Max ? -INFINITY : combine == ScatterCombine::Min ? INFINITY : 1.0f;
        std::vector<float> want(rows * width, identity);
        for (int64_t i = 0; i < n; ++i) {
          for (int64_t c = 0; c < width; ++c) {
            float& acc = want[index[i] * width + c];
            const float v = src[i * width + c];
            acc = combine == ScatterCombine::Max ? std::max(acc, v) : combine == ScatterCombine::Min ? std::min(acc, v) : acc * v;
            if (dtype == DType::BF16) acc = sim::round_to_bf16(acc);
          }
        }
        const auto got = scatter(src, width, index, rows, -1, dtype, false, combine);
        bool same = true;
        for (size_t k = 0; k < want.size() && same; ++k) same = got[k] == want[k];
        CHECK(same);
        CHECK(got[5 * width] == identity);
      }
    }
  }

  TEST_CASE("scatter-add traps on an index outside the table") {
    const std::vector<float> src(8, 1.0f);
    CHECK_THROWS_WITH_AS(scatter(src, 4, {0, 7}, 5, -1, DType::F32, false), doctest::Contains("trap #2"), sim::SimError);
    CHECK_THROWS_WITH_AS(scatter(src, 4, {0, -3}, 5, -1, DType::F32, true), doctest::Contains("trap #2"), sim::SimError);
    // -1 is out of range, not a match for "no padding index" (-1)
    CHECK_THROWS_WITH_AS(scatter(src, 4, {0, -1}, 5, -1, DType::F32, false), doctest::Contains("trap #2"), sim::SimError);
  }
}
