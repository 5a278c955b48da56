// Integer powers (kernels/compose/integer_power.h) against c10's powi on the host, in wrapping
// int32: bases across the range, exponents from -4 to 40, by a tensor and by constants.
#include <doctest/doctest.h>

#include <optional>
#include <vector>

#include "kernels/compose/integer_power.h"
#include "support/run_graph.h"

using namespace vtpu;
using kernels::DType;

namespace {

int32_t powi(int32_t a, int32_t b) {  // c10's powi, wrapping
  if (b < 0) return a == 1 ? 1 : a == -1 ? ((-int64_t(b)) % 2 ? -1 : 1) : 0;
  uint32_t result = 1, base = uint32_t(a);
  for (; b; b /= 2, base *= base) {
    if (b & 1) result *= base;
  }
  return int32_t(result);
}

std::vector<int32_t> on_chip(const std::vector<int32_t>& a, const std::vector<int32_t>& b, std::optional<int64_t> constant) {
  const auto inputs = constant ? testing::Int32Inputs{a} : testing::Int32Inputs{a, b};
  return testing::run_int32_graph(inputs, [&](kernels::Graph& g, const std::vector<int>& v) {
    return constant ? kernels::integer_power_by(g, v[0], *constant) : kernels::integer_power(g, v[0], v[1]);
  });
}

}  // namespace

TEST_SUITE("kernels") {
  TEST_CASE("integer_power: wrapping int32 powers, negative exponents as c10's powi") {
    const std::vector<int32_t> bases = {0, 1, -1, 2, -2, 3, -7, 10, 46341, INT32_MIN, INT32_MAX, 123456789};
    std::vector<int32_t> a, b;
    for (int32_t base : bases) {
      for (int32_t e = -4; e <= 40; ++e) a.push_back(base), b.push_back(e);
    }
    const auto got = on_chip(a, b, std::nullopt);
    REQUIRE(got.size() == a.size());
    for (size_t i = 0; i < a.size(); ++i) {
      if (got[i] != powi(a[i], b[i])) FAIL(a[i], " ** ", b[i], ": got ", got[i], " want ", powi(a[i], b[i]));
    }
    for (int64_t e : {0, 1, 2, 3, 19, 31, 64}) {
      const auto by_constant = on_chip(bases, bases, e);
      for (size_t i = 0; i < bases.size(); ++i) {
        if (by_constant[i] != powi(bases[i], int32_t(e))) FAIL(bases[i], " ** ", e, ": got ", by_constant[i]);
      }
    }
    kernels::Graph g;
    CHECK_THROWS_WITH_AS(kernels::integer_power_by(g, g.input({{2}, DType::I32}, "a"), -1), doctest::Contains("negative"),
                         kernels::KernelError);
  }
}
