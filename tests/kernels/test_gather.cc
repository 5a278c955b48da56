// The gather kernel (index_select along dim 0, embedding lookups): rows of f32, bf16 and int32
// tables picked by int32 indices and by int64 indices read as word pairs, with repeated indices,
// ragged widths and more indices than one chunk; indices outside the table trap. Checked element
// by element against the host, and the DMA traffic against the rows moved.
#include <doctest/doctest.h>

#include <random>

#include "kernels/codegen/asm_writer.h"
#include "kernels/generators/gather.h"
#include "sim/sim_error.h"
#include "support/run_program.h"

using namespace vtpu;
using kernels::DType;

namespace {

// Gathers `index` rows of a [rows, width] table of 16- or 32-bit elements (raw bits); returns the
// output bits and the run.
template <typename T>
std::pair<std::vector<T>, sim::LaunchResult> gather(const std::vector<T>& table, int64_t rows, int64_t width, DType dtype,
                                                    const std::vector<int64_t>& index, bool pairs, bool wrap = false) {
  kernels::GatherSpec spec{dtype, width, pairs, wrap};
  std::vector<testing::Arg> args = {testing::Arg::buf(testing::HostBuffer::of(table))};
  if (pairs) {
    args.push_back(testing::Arg::buf(testing::HostBuffer::of(index)));
  } else {
    args.push_back(testing::Arg::buf(testing::HostBuffer::of(std::vector<int32_t>(index.begin(), index.end()))));
  }
  args.push_back(testing::Arg::buf(testing::HostBuffer::of(std::vector<T>(index.size() * width))));
  args.push_back(testing::Arg::val(int32_t(index.size())));
  args.push_back(testing::Arg::val(int32_t(rows)));
  auto out = testing::run_program(kernels::make_gather(spec, sim::load_chip("v5e")), args, "v5e");
  return {out.buffers[2].as<T>(), out.result};
}

std::vector<int64_t> random_index(size_t n, int64_t rows, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> d(0, rows - 1);
  std::vector<int64_t> index(n);
  for (auto& i : index) i = d(rng);
  return index;
}

template <typename T>
void check_rows(const std::vector<T>& got, const std::vector<T>& table, int64_t width, const std::vector<int64_t>& index) {
  REQUIRE(got.size() == index.size() * width);
  for (size_t i = 0; i < index.size(); ++i) {
    for (int64_t c = 0; c < width; ++c) {
      if (got[i * width + c] != table[index[i] * width + c]) {
        FAIL_CHECK("index ", i, " (row ", index[i], ") column ", c);
        return;
      }
    }
  }
}

}  // namespace

TEST_SUITE("kernels") {
  TEST_CASE("gather picks table rows: f32, bf16 and int32 tables, int32 and int64 indices") {
    for (bool pairs : {false, true}) {
      for (auto [rows, width, n] : {std::array<int64_t, 3>{1, 1, 1}, {7, 129, 20}, {1000, 7, 700}, {50, 768, 300}}) {
        CAPTURE(pairs);
        CAPTURE(rows);
        CAPTURE(width);
        CAPTURE(n);
        auto index = random_index(n, rows, 7);
        index[0] = rows - 1;  // the last row, and a repeat
        if (n > 1) index[n - 1] = index[0];
        std::vector<uint32_t> table(rows * width);
        for (size_t k = 0; k < table.size(); ++k) table[k] = uint32_t(k * 2654435761u);
        auto [f32, run] = gather(table, rows, width, DType::F32, index, pairs);
        check_rows(f32, table, width, index);
        // Traffic: the indices, each picked row once in and once out (HBM is not cached).
        CHECK(run.summary.hbm_read_bytes == uint64_t(n) * (pairs ? 8 : 4) + uint64_t(n) * width * 4);
        CHECK(run.summary.hbm_write_bytes == uint64_t(n) * width * 4);
        check_rows(gather(table, rows, width, DType::I32, index, pairs).first, table, width, index);
        std::vector<uint16_t> bf(rows * width);
        for (size_t k = 0; k < bf.size(); ++k) bf[k] = uint16_t(k * 40503u);
        check_rows(gather(bf, rows, width, DType::BF16, index, pairs).first, bf, width, index);
      }
    }
  }

  TEST_CASE("an index outside the table traps: negative, past the rows, past 2^31 as int64") {
    const std::vector<uint32_t> table(10 * 4, 1);
    for (int64_t bad : {int64_t{-1}, int64_t{10}, int64_t{1} << 32}) {
      CAPTURE(bad);
      CHECK_THROWS_WITH_AS(gather(table, 10, 4, DType::F32, {3, bad, 2}, true), doctest::Contains("trap #2"), sim::SimError);
    }
    CHECK_THROWS_WITH_AS(gather(table, 10, 4, DType::F32, {-5}, false), doctest::Contains("trap #2"), sim::SimError);
    CHECK_NOTHROW(gather(table, 10, 4, DType::F32, {9, 0}, false));
  }

  TEST_CASE("with wrap_negative (torch's x[idx]) negative indices count from the end; beyond -rows they trap") {
    std::vector<uint32_t> table(10 * 3);
    for (size_t i = 0; i < table.size(); ++i) table[i] = uint32_t(i);
    for (bool pairs : {false, true}) {
      CAPTURE(pairs);
      const auto [got, run] = gather(table, 10, 3, DType::F32, {-1, 0, -10, 4, -3}, pairs, true);
      std::vector<uint32_t> want;
      for (int64_t row : {9, 0, 0, 4, 7}) {
        for (int64_t c = 0; c < 3; ++c) want.push_back(uint32_t(row * 3 + c));
      }
      CHECK(got == want);
      for (int64_t bad : {int64_t{-11}, int64_t{10}}) {
        CAPTURE(bad);
        CHECK_THROWS_WITH_AS(gather(table, 10, 3, DType::F32, {1, bad}, pairs, true), doctest::Contains("trap #2"), sim::SimError);
      }
    }
    // an int64 index below -2^31 or from 2^31 up has a high word other than -1 or 0
    CHECK_THROWS_WITH_AS(gather(table, 10, 3, DType::F32, {-(int64_t{1} << 32) + 3}, true, true), doctest::Contains("trap #2"),
                         sim::SimError);
    CHECK_THROWS_WITH_AS(gather(table, 10, 3, DType::F32, {(int64_t{1} << 31) + 3}, true, true), doctest::Contains("trap #2"),
                         sim::SimError);
  }

  TEST_CASE("gather errors name the problem") {
    const auto v5e = sim::load_chip("v5e");
    CHECK_THROWS_WITH_AS(kernels::make_gather({DType::I64, 4, false}, v5e), doctest::Contains("i64 is not supported"),
                         kernels::KernelError);
    CHECK_THROWS_WITH_AS(kernels::make_gather({DType::F32, 1 << 20, false}, v5e), doctest::Contains("exceed"),
                         kernels::KernelError);
  }
}
