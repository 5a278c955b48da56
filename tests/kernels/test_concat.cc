// The concat kernel: inputs of [outer, width_i] placed side by side in [outer, sum(width_i)],
// including rows wider than the VMEM staging buffer (copied in column pieces); checked element by
// element against the host.
#include <doctest/doctest.h>

#include "kernels/codegen/asm_writer.h"
#include "kernels/generators/concat.h"
#include "support/run_program.h"

using namespace vtpu;
using kernels::DType;

namespace {

void check_concat(int64_t outer, const std::vector<int64_t>& widths) {
  int64_t total = 0;
  for (int64_t w : widths) total += w;
  std::vector<testing::Arg> args;
  std::vector<std::vector<float>> inputs;
  for (size_t i = 0; i < widths.size(); ++i) {
    std::vector<float> x(outer * widths[i]);
    for (size_t k = 0; k < x.size(); ++k) x[k] = float(i * 1000003 + k % 65521);
    inputs.push_back(x);
    args.push_back(testing::Arg::buf(testing::HostBuffer::of(x)));
  }
  args.push_back(testing::Arg::buf(testing::HostBuffer::of(std::vector<float>(outer * total))));
  for (int32_t v : kernels::concat_scalars({outer, widths, DType::F32})) args.push_back(testing::Arg::val(v));
  // one program per number of inputs: the shape is all launch scalars
  auto out = testing::run_program(kernels::make_concat(DType::F32, int(widths.size()), sim::load_chip("v5e")), args, "v5e");
  const auto got = out.buffers[widths.size()].as<float>();
  for (int64_t r = 0; r < outer; ++r) {
    int64_t column = 0;
    for (size_t i = 0; i < widths.size(); ++i) {
      for (int64_t c = 0; c < widths[i]; ++c) {
        if (got[r * total + column + c] != inputs[i][r * widths[i] + c]) {
          FAIL_CHECK("row ", r, " input ", i, " column ", c);
          return;
        }
      }
      column += widths[i];
    }
  }
}

}  // namespace

TEST_SUITE("kernels") {
  TEST_CASE("concat: narrow and wide rows") {
    check_concat(7, {1, 129, 64});
    check_concat(1000, {3, 5});
    check_concat(3, {200000, 7});   // a row of 800 KB: column pieces through the 512 KB staging buffer
    check_concat(4, {0, 9, 0});     // empty inputs move nothing
    for (int64_t seq : {7, 40, 48, 129}) check_concat(2 * 4, {seq * 32, 32});  // a KV cache growing by one token
  }

  TEST_CASE("concat errors") {
    CHECK_THROWS_WITH_AS(kernels::concat_scalars({1, {}, DType::F32}), doctest::Contains("no inputs"), kernels::KernelError);
    CHECK_THROWS_WITH_AS(kernels::concat_scalars({1 << 20, {1 << 10}, DType::F32}), doctest::Contains("too large"), kernels::KernelError);
    CHECK_THROWS_WITH_AS(kernels::make_concat(DType::I64, 2, sim::load_chip("v5e")), doctest::Contains("i64"), kernels::KernelError);
  }
}
