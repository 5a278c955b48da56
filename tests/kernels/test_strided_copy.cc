// The strided copy kernel makes any view dense: transposes, permutes, slices with an offset,
// expands (stride 0); checked element by element against index arithmetic on the host.
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>
#include <string>

#include "kernels/codegen/asm_writer.h"
#include "kernels/generators/strided_copy.h"
#include "support/run_program.h"

using namespace vtpu;
using kernels::DType;

namespace {

template <typename T>
void check_view(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides, int64_t offset, size_t source_elems,
                DType dtype, const std::string& chip = "v5e") {
  std::vector<T> src(source_elems);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<T>((i * 7 + 3) % 251);
  int64_t numel = 1;
  for (int64_t d : sizes) numel *= d;
  const auto config = sim::load_chip(chip);
  const kernels::CopyPlan plan = kernels::plan_strided_copy({sizes, strides, offset, dtype}, config);
  std::vector<testing::Arg> args{testing::Arg::buf(testing::HostBuffer::of(src)),
                                 testing::Arg::buf(testing::HostBuffer::of(std::vector<T>(numel)))};
  for (int32_t v : plan.scalars) args.push_back(testing::Arg::val(v));
  auto out = testing::run_program(kernels::make_strided_copy(plan.shape, config), std::move(args), chip);
  const auto got = out.buffers[1].template as<T>();
  std::vector<int64_t> index(sizes.size(), 0);
  for (int64_t flat = 0; flat < numel; ++flat) {
    int64_t at = offset;
    for (size_t d = 0; d < sizes.size(); ++d) at += index[d] * strides[d];
    if (got[flat] != src[at]) {
      FAIL_CHECK("element ", flat, ": got ", double(got[flat]), " want ", double(src[at]));
      return;
    }
    for (size_t d = sizes.size(); d-- > 0;) {
      if (++index[d] < sizes[d]) break;
      index[d] = 0;
    }
  }
}

}  // namespace

TEST_SUITE("kernels") {
  TEST_CASE("strided copy: transpose, permute, slice, expand, contiguous") {
    check_view<float>({200, 300}, {1, 200}, 0, 60000, DType::F32);                          // .t() of [300, 200]
    check_view<float>({2, 3, 5, 7}, {105, 7, 21, 1}, 0, 210, DType::F32);                   // permute(0, 2, 1, 3)
    check_view<float>({4, 9}, {20, 2}, 5, 100, DType::F32);                                  // a strided slice
    check_view<float>({6, 129}, {0, 1}, 0, 129, DType::F32);                                 // expand a row
    check_view<float>({3, 1000}, {1000, 1}, 0, 3000, DType::F32);                           // already dense
    check_view<uint16_t>({64, 33}, {1, 64}, 0, 64 * 33, DType::BF16);                       // bf16 transpose
    check_view<int8_t>({5, 6, 7}, {1, 5, 30}, 0, 210, DType::I8);                            // int8 reversed dims
    check_view<float>({3000, 40}, {1, 3000}, 0, 120000, DType::F32, "v6e");                  // many chunks
  }

  TEST_CASE("strided copy: a slab longer than VMEM staging is split into more outer indices") {
    // v4 tiles in 12 MiB of VMEM: staging takes at most 3 MiB, 786432 f32.
    check_view<float>({2, 500000}, {500000, 1}, 300000, 1300000, DType::F32, "v4");  // one 4 MB contiguous run
    check_view<float>({300, 3000}, {3100, 1}, 7, 930000, DType::F32, "v4");          // 300 rows of 12 KB: 3.6 MB
    check_view<float>({2, 3, 300000}, {2000000, 600000, 2}, 1, 4000000, DType::F32, "v4");  // 900000 strided elements
    // A run with no divisor that makes a piece of 4 KiB or more stays one slab, and is refused.
    const int64_t prime = 1000003;
    CHECK_THROWS_WITH(kernels::plan_strided_copy({{prime}, {1}, 0, DType::F32}, sim::load_chip("v4")),
                      doctest::Contains("does not fit VMEM staging"));
  }

  TEST_CASE("strided copy: one program per view structure, sizes at launch") {
    const auto chip = sim::load_chip("v5e");
    // The head split of q, k and v out of a fused [batch, seq, 3 * hidden] projection, for every
    // sequence length: the same program, with different scalars.
    std::vector<std::string> signatures;
    for (int64_t seq : {7, 32, 40, 129}) {
      for (int64_t part : {0, 1, 2}) {
        const kernels::StridedCopySpec spec{{2, 4, seq, 32}, {seq * 384, 32, 384, 1}, part * 128, DType::F32};
        signatures.push_back(kernels::plan_strided_copy(spec, chip).shape.signature());
        check_view<float>(spec.sizes, spec.strides, spec.offset, size_t(2 * seq * 384), DType::F32);
      }
    }
    CHECK(std::count(signatures.begin(), signatures.end(), signatures.front()) == int(signatures.size()));
    // A slab larger than the common staging buffer gets a program of its own.
    const auto big = kernels::plan_strided_copy({{2, 300, 300}, {100000, 301, 1}, 0, DType::F32}, chip);
    CHECK(big.shape.staging_bytes > 256 * 1024);
    check_view<float>({2, 300, 300}, {100000, 301, 1}, 0, 200000, DType::F32);
  }

  TEST_CASE("strided copy: outer dims stepping backwards (flipped windows)") {
    // A 3x3 kernel's windows over a 6x6 image, flipped in both kernel dims: [3, 3, 4, 4] with
    // strides [-6, -1, 6, 1] from the last window's corner.
    check_view<float>({3, 3, 4, 4}, {-6, -1, 6, 1}, 2 * 6 + 2, 36, DType::F32);
    check_view<float>({2, 5, 7}, {-40, 7, 2}, 40, 81, DType::F32);  // elements kind, batch reversed
    check_view<uint16_t>({4, 3, 130}, {-130, 520, 1}, 390, 4 * 3 * 130, DType::BF16);
    // the second innermost dim steps backwards (a conv1d's flipped taps): one row per DMA
    check_view<float>({5, 3, 40}, {-1, 50, 1}, 4, 200, DType::F32);
    check_view<float>({3, 40}, {-2, 1}, 4, 60, DType::F32);
    check_view<float>({3, 7}, {9, -1}, 6, 27, DType::F32);  // the innermost itself: one element per DMA
  }

  TEST_CASE("strided copy errors") {
    const auto chip = sim::load_chip("v5e");
    CHECK_THROWS_WITH_AS(kernels::plan_strided_copy({{2, 2}, {1}, 0, DType::F32}, chip), doctest::Contains("rank"), kernels::KernelError);
    CHECK_THROWS_WITH_AS(kernels::plan_strided_copy({{2}, {1}, 0, DType::I64}, chip), doctest::Contains("i64"), kernels::KernelError);
    CHECK_THROWS_WITH_AS(kernels::plan_strided_copy({{2, 2}, {2, 1}, -1, DType::F32}, chip), doctest::Contains("starts before"),
                         kernels::KernelError);
    CHECK_THROWS_WITH_AS(kernels::plan_strided_copy({{2, 2}, {-4, 1}, 2, DType::F32}, chip), doctest::Contains("starts before"),
                         kernels::KernelError);
    CHECK_THROWS_WITH_AS(kernels::plan_strided_copy({{2, 2}, {int64_t{1} << 32, 1}, 0, DType::F32}, chip),
                         doctest::Contains("32 bits"), kernels::KernelError);
  }
}
