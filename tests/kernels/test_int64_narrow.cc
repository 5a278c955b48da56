// int64 word pairs narrowed to int32 on the chip (kernels/generators/int64_narrow.h): exact for values
// inside the bound, including negatives and chunks past the first; a trap (TrapCode::Int64OutOfRange) for
// a value at or past the bound and for a high word that is not the low word's sign.
#include <doctest/doctest.h>

#include <cstring>

#include "kernels/codegen/trap_code.h"
#include "kernels/generators/int64_narrow.h"
#include "sim/sim_error.h"
#include "support/run_graph.h"

using namespace vtpu;
using kernels::DType;

namespace {

std::vector<int32_t> narrow(const std::vector<int64_t>& values, int64_t bound) {
  std::vector<int32_t> words(values.size() * 2);
  std::memcpy(words.data(), values.data(), values.size() * 8);  // little-endian: (low, high)
  kernels::Graph g;
  const int in = g.input({{int64_t(values.size()), 2}, DType::I32}, "words");
  g.mark_output(g.int64_narrow(in, bound));
  kernels::ProgramCache cache;
  const auto plan = kernels::make_plan(g, kernels::FusionStrategy::Greedy, sim::load_chip("v5e"), cache);
  const auto out = testing::run_graph(g, plan, {{in, testing::int32_bits_as_floats(words)}});
  return testing::floats_as_int32_bits(out);
}

}  // namespace

TEST_SUITE("kernels") {
  TEST_CASE("int64 narrow: exact inside the bound, over several chunks") {
    std::vector<int64_t> values;
    for (int64_t i = 0; i < 9000; ++i) values.push_back((i % 2 ? -1 : 1) * (i * 104729 % (int64_t{1} << 30)));
    values.back() = (int64_t{1} << 30) - 1;
    const auto got = narrow(values, int64_t{1} << 30);
    REQUIRE(got.size() == values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      if (got[i] != values[i]) FAIL("element ", i, ": got ", got[i], " want ", values[i]);
    }
  }

  TEST_CASE("int64 narrow: values outside the bound or int32 trap") {
    const auto traps = [](std::vector<int64_t> v, int64_t bound) {
      try {
        narrow(v, bound);
      } catch (const sim::SimError& e) {
        return e.kind() == sim::SimErrorKind::Trap && e.trap_code() == kernels::trap_number(kernels::TrapCode::Int64OutOfRange);
      }
      return false;
    };
    CHECK(traps({1, 2, int64_t{1} << 30}, int64_t{1} << 30));
    CHECK(traps({-(int64_t{1} << 30), 0}, int64_t{1} << 30));
    CHECK(traps({5, int64_t{1} << 32}, int64_t{1} << 31));        // low word 0: the high word gives it away
    CHECK(traps({-(int64_t{1} << 33) + 7, 1}, int64_t{1} << 31));  // a negative beyond int32
    CHECK_FALSE(traps({-(int64_t{1} << 30) + 1, (int64_t{1} << 30) - 1}, int64_t{1} << 30));
    // a bound of 2^31 admits every int32 but INT32_MIN (whose magnitude is 2^31)
    CHECK_FALSE(traps({INT32_MAX, -INT32_MAX, 0, -1}, int64_t{1} << 31));
    CHECK(traps({INT32_MIN, 0}, int64_t{1} << 31));
    CHECK(traps({INT32_MAX, 0}, INT32_MAX));
    kernels::Graph g;
    CHECK_THROWS_WITH_AS(g.int64_narrow(g.input({{4}, DType::I32}), 8), doctest::Contains("i32[.., 2]"), kernels::KernelError);
  }
}
