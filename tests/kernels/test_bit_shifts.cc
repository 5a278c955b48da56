// Bit shifts of int32 values (kernels/compose/bit_shifts.h) against C++'s on the host with ATen's
// rules for amounts outside the width: by a tensor of amounts and by each constant.
#include <doctest/doctest.h>

#include <optional>
#include <vector>

#include "kernels/compose/bit_shifts.h"
#include "support/run_graph.h"

using namespace vtpu;
using kernels::DType;

namespace {

const std::vector<int32_t> kValues = {INT32_MIN, INT32_MAX, -1, 0, 1, 5, -7, (1 << 24) + 3, -(1 << 30) - 5, 123456789};

int32_t left(int32_t a, int64_t s) { return s < 0 || s >= 32 ? 0 : int32_t(uint32_t(a) << s); }
int32_t right(int32_t a, int64_t s) { return a >> (s < 0 || s >= 32 ? 31 : s); }

// a (op) s over every pair, or by `constant`; `left_shift` picks the op.
std::vector<int32_t> on_chip(bool left_shift, const std::vector<int32_t>& a, const std::vector<int32_t>& s,
                             std::optional<int64_t> constant) {
  const auto inputs = constant ? testing::Int32Inputs{a} : testing::Int32Inputs{a, s};
  return testing::run_int32_graph(inputs, [&](kernels::Graph& g, const std::vector<int>& v) {
    if (!constant) return left_shift ? kernels::shift_left(g, v[0], v[1], 32) : kernels::shift_right(g, v[0], v[1], 32, true);
    return left_shift ? kernels::shift_left_by(g, v[0], *constant, 32) : kernels::shift_right_by(g, v[0], *constant, 32, true);
  });
}

}  // namespace

TEST_SUITE("kernels") {
  TEST_CASE("bit shifts: every amount from -3 to 40, by a tensor and by a constant") {
    std::vector<int32_t> a, s;
    for (int32_t v : kValues) {
      for (int32_t amount = -3; amount <= 40; ++amount) a.push_back(v), s.push_back(amount);
    }
    for (const bool left_shift : {true, false}) {
      CAPTURE(left_shift);
      const auto got = on_chip(left_shift, a, s, std::nullopt);
      REQUIRE(got.size() == a.size());
      for (size_t i = 0; i < a.size(); ++i) {
        const int32_t want = left_shift ? left(a[i], s[i]) : right(a[i], s[i]);
        if (got[i] != want) FAIL(a[i], (left_shift ? " << " : " >> "), s[i], ": got ", got[i], " want ", want);
      }
      for (int64_t amount = -3; amount <= 40; ++amount) {
        const auto by_constant = on_chip(left_shift, kValues, kValues, amount);
        for (size_t i = 0; i < kValues.size(); ++i) {
          const int32_t want = left_shift ? left(kValues[i], amount) : right(kValues[i], amount);
          if (by_constant[i] != want) FAIL(kValues[i], (left_shift ? " << " : " >> "), amount, ": got ", by_constant[i], " want ", want);
        }
      }
    }
  }
}
