// The transpose kernel (what plan_strided_copy picks for views whose two innermost dims are
// swapped): exact copies over ragged tile edges, batches with their own strides, row pitches
// wider than a row, offsets and every dtype on the chip; its time against the HBM bound.
#include <doctest/doctest.h>

#include <cstdint>

#include "kernels/codegen/asm_writer.h"
#include "kernels/generators/strided_copy.h"
#include "kernels/generators/transpose.h"
#include "support/run_program.h"

using namespace vtpu;
using kernels::DType;

namespace {

// dst[o, p, q] = src[offset + sum(o_i * outer_stride_i) + q * pitch + p], computed on the host.
template <typename T>
testing::RunOutput check_transpose(const kernels::TransposeSpec& spec, const std::string& chip = "v5e") {
  int64_t outer = 1, span = spec.offset + (spec.q - 1) * spec.pitch + spec.p;
  for (size_t i = 0; i < spec.outer_sizes.size(); ++i) {
    outer *= spec.outer_sizes[i];
    span += (spec.outer_sizes[i] - 1) * spec.outer_strides[i];
  }
  std::vector<T> src(span);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<T>((i * 7 + 3) % 251);
  const int64_t numel = outer * spec.p * spec.q;
  std::vector<testing::Arg> args{testing::Arg::buf(testing::HostBuffer::of(src)),
                                 testing::Arg::buf(testing::HostBuffer::of(std::vector<T>(numel)))};
  for (int32_t v : kernels::transpose_scalars(spec)) args.push_back(testing::Arg::val(v));
  const auto program = kernels::make_transpose(spec.dtype, int(spec.outer_sizes.size()), sim::load_chip(chip));
  auto out = testing::run_program(program, std::move(args), chip);
  const auto got = out.buffers[1].template as<T>();
  for (int64_t o = 0; o < outer; ++o) {
    int64_t base = spec.offset, rest = o;
    for (size_t i = spec.outer_sizes.size(); i-- > 0;) {
      base += (rest % spec.outer_sizes[i]) * spec.outer_strides[i];
      rest /= spec.outer_sizes[i];
    }
    for (int64_t p = 0; p < spec.p; ++p) {
      for (int64_t q = 0; q < spec.q; ++q) {
        const T want = src[base + q * spec.pitch + p], have = got[(o * spec.p + p) * spec.q + q];
        if (have != want) {
          FAIL_CHECK("o ", o, " p ", p, " q ", q, ": got ", double(have), " want ", double(want));
          return out;
        }
      }
    }
  }
  return out;
}

kernels::TransposeSpec plain(int64_t p, int64_t q, DType dtype = DType::F32) {
  kernels::TransposeSpec s;
  s.p = p;
  s.q = q;
  s.pitch = p;
  s.dtype = dtype;
  return s;
}

}  // namespace

TEST_SUITE("kernels") {
  TEST_CASE("transpose: exact over ragged tiles and odd sizes") {
    for (int64_t p : {1, 7, 128, 129, 1000}) {
      for (int64_t q : {1, 7, 129, 300}) {
        CAPTURE(p);
        CAPTURE(q);
        check_transpose<float>(plain(p, q));
      }
    }
  }

  TEST_CASE("transpose: batches, pitch, offset") {
    kernels::TransposeSpec s = plain(64, 32);  // k.transpose(-1, -2) of [2, 4, 32, 64] heads split from [.., 32, 4 * 64]
    s.outer_sizes = {2, 4};
    s.outer_strides = {32 * 256, 64};
    s.pitch = 256;
    check_transpose<float>(s);
    kernels::TransposeSpec t = plain(130, 200);  // a slice: pitch wider than the row, an offset
    t.pitch = 150 + 130;
    t.offset = 33;
    t.outer_sizes = {3};
    t.outer_strides = {0};  // an expanded batch reads the same matrix
    check_transpose<float>(t);
  }

  TEST_CASE("transpose: every dtype on the chip") {
    check_transpose<uint16_t>(plain(200, 131, DType::BF16));
    check_transpose<int32_t>(plain(129, 140, DType::I32));
    check_transpose<int8_t>(plain(257, 9, DType::I8));
    check_transpose<uint8_t>(plain(8, 130, DType::Bool));
    check_transpose<float>(plain(300, 500), "v6e");
  }

  TEST_CASE("transpose: plan_strided_copy picks it for swapped innermost dims") {
    const auto chip = sim::load_chip("v5e");
    const auto kind = [&](kernels::StridedCopySpec spec) { return kernels::plan_strided_copy(spec, chip).shape.kind; };
    CHECK(kind({{200, 300}, {1, 200}, 0, DType::F32}) == kernels::CopyKind::Transpose);
    CHECK(kind({{2, 64, 32}, {2048, 1, 64}, 0, DType::F32}) == kernels::CopyKind::Transpose);
    CHECK(kind({{4, 9}, {20, 2}, 5, DType::F32}) == kernels::CopyKind::Elements);  // not a transpose
    CHECK(kind({{4, 300}, {1, 4}, 0, DType::F32}) == kernels::CopyKind::Elements);  // too thin for tiles
    CHECK(kind({{4, 300}, {600, 1}, 0, DType::F32}) == kernels::CopyKind::Rows);
    CHECK(kernels::make_strided_copy(kernels::plan_strided_copy({{200, 300}, {1, 200}, 0, DType::F32}, chip).shape, chip).name ==
          "transpose");
  }

  TEST_CASE("transpose: time near the HBM bound") {
    // Every byte is read once and written once; tiles overlap their DMAs with the previous tile's
    // vtrans, so the kernel should sit just above bytes / bandwidth plus one tile's latency.
    for (const char* chip : {"v5e", "v6e"}) {
      CAPTURE(chip);
      const auto config = sim::load_chip(chip);
      const auto out = check_transpose<float>(plain(1024, 1024), chip);
      const double bound = 2.0 * 1024 * 1024 * 4 / config.hbm_bytes_per_cycle();
      CHECK(double(out.result.cycles) >= bound);
      CHECK(double(out.result.cycles) <= 1.25 * bound);
    }
  }

  TEST_CASE("transpose errors") {
    CHECK_THROWS_WITH_AS(kernels::transpose_scalars(plain(0, 4)), doctest::Contains("empty"), kernels::KernelError);
    CHECK_THROWS_WITH_AS(kernels::transpose_scalars(plain(4, 4, DType::I64)), doctest::Contains("i64"), kernels::KernelError);
    CHECK_THROWS_WITH_AS(kernels::make_transpose(DType::I64, 0, sim::load_chip("v5e")), doctest::Contains("i64"), kernels::KernelError);
    kernels::TransposeSpec s = plain(4, 4);
    s.outer_sizes = {2};
    CHECK_THROWS_WITH_AS(kernels::transpose_scalars(s), doctest::Contains("rank"), kernels::KernelError);
  }
}
