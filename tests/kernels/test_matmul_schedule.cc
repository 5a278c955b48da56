// The matmul's schedule as a value (kernels/generators/matmul_schedule.h): block shapes, passes
// and VMEM layout checked against the rules its header states, with no program emitted.
#include <doctest/doctest.h>

#include <algorithm>

#include "kernels/codegen/kernel_error.h"
#include "kernels/codegen/vreg_shape.h"
#include "kernels/compose/long_k_matmul.h"
#include "kernels/generators/matmul.h"
#include "kernels/generators/matmul_schedule.h"
#include "sim/chip_config.h"

using namespace vtpu;
using kernels::DType;
using kernels::round_up;

namespace {

kernels::MatmulSpec spec_of(int64_t m, int64_t n, int64_t k, DType dtype = DType::BF16, int passes = 1) {
  kernels::MatmulSpec s;
  s.m = m;
  s.n = n;
  s.k = k;
  s.a_dtype = s.b_dtype = dtype;
  s.passes = passes;
  return s;
}

}  // namespace

TEST_SUITE("kernels") {
  TEST_CASE("a matmul schedule: blocks of BM rows by every MXU's columns, K in MXU-deep slices") {
    for (const char* name : {"v5e", "v6e"}) {
      CAPTURE(name);
      const sim::ChipConfig chip = sim::load_chip(name);
      const auto spec = spec_of(1000, 3000, 700);
      const kernels::MatmulSchedule s(spec, chip, true);
      const int64_t d = chip.mxu_dim;
      CHECK(s.d_ == d);
      CHECK(s.bn_ == std::min<int64_t>(int64_t{chip.mxu_per_core} * d, round_up(3000, d)));
      CHECK(s.mxus_ * d == s.bn_);
      // Two blocks' accumulators fit the slots (even and odd blocks alternate), at most 256 rows.
      CHECK(s.bm_ % 8 == 0);
      CHECK(s.bm_ <= 256);
      CHECK(2 * s.bm_ / 8 <= chip.mxu_acc_slots);
      CHECK(s.k_pad_ == round_up(700, d));
      CHECK(s.kt_ * d == s.k_pad_);
      CHECK_FALSE(s.staged_);  // bf16 B as given goes straight to the weight panel
      CHECK(s.vmem_bytes_ <= chip.kernel_vmem_bytes());
      CHECK(s.c_vmem_[1] >= s.c_vmem_[0] + s.c_tile_bytes_);  // the two C tiles do not overlap
    }
  }

  TEST_CASE("f32 at 'highest': three bf16 parts a side, six products grouped by B part") {
    const sim::ChipConfig chip = sim::load_chip("v5e");
    const auto spec = spec_of(256, 256, 256, DType::F32, 6);
    const kernels::MatmulSchedule s(spec, chip, true);
    CHECK(s.a_parts_ == 3);
    CHECK(s.b_parts_ == 3);
    REQUIRE(s.pairs_.size() == 6);
    CHECK(std::is_sorted(s.pairs_.begin(), s.pairs_.end(), [](auto x, auto y) { return x.second < y.second; }));
    CHECK(s.staged_);  // f32 B is converted into parts on the VPU
    // The leading pass multiplies B's part 0 as it is, the others the parts of its finite form:
    // four stored parts, loaded in order, each once per K slice.
    CHECK(s.finite_passes_);
    CHECK(s.b_stored_parts_ == 4);
    CHECK(s.pairs_.front() == std::pair{0, 0});
    CHECK(s.weight_part(s.pairs_.front()) == 0);
    CHECK(std::is_sorted(s.pairs_.begin(), s.pairs_.end(), [&](auto x, auto y) { return s.weight_part(x) < s.weight_part(y); }));
    for (size_t i = 1; i < s.pairs_.size(); ++i) CHECK(s.weight_part(s.pairs_[i]) == 1 + s.pairs_[i].second);
    // The leading pass stores a slice's finite LHS rows ([BM, D] f32) for the others to load.
    CHECK(s.finite_a_vmem_ > 0);
    CHECK(s.finite_a_vmem_ + uint64_t(s.bm_ * s.d_ * 4) <= s.vmem_bytes_);
  }

  TEST_CASE("one pass needs no finite form; a bf16 B beside a split f32 A is staged to make one") {
    const sim::ChipConfig chip = sim::load_chip("v5e");
    const kernels::MatmulSchedule one(spec_of(256, 256, 256, DType::F32, 1), chip, true);
    CHECK_FALSE(one.finite_passes_);
    CHECK(one.b_stored_parts_ == 1);
    auto mixed = spec_of(256, 256, 256, DType::F32, 6);
    mixed.b_dtype = DType::BF16;
    const kernels::MatmulSchedule s(mixed, chip, true);
    CHECK(s.b_parts_ == 1);
    CHECK(s.pairs_.size() == 3);  // A's three parts against B's one
    CHECK(s.finite_passes_);
    CHECK(s.b_stored_parts_ == 2);
    CHECK(s.staged_);
  }

  TEST_CASE("a schedule too large for VMEM takes smaller blocks: A read per block, fewer rows, fewer MXUs") {
    // f32 at 'highest' on v4 (12 MiB of kernel VMEM): the full-size blocks' B panels (four
    // stored bf16 parts of all of K for 4 MXUs' columns, twice) and f32 staging do not fit at
    // 1024^3.
    const sim::ChipConfig v4 = sim::load_chip("v4");
    for (int64_t k : {1024, 2048}) {
      CAPTURE(k);
      const kernels::MatmulSchedule s(spec_of(1024, 1024, k, DType::F32, 6), v4, true);
      CHECK(s.vmem_bytes_ <= v4.kernel_vmem_bytes());
      CHECK((!s.a_resident_ || s.bm_ < 256 || s.mxus_ < v4.mxu_per_core));
      CHECK(s.mxus_ * s.d_ == s.bn_);
      if (s.mxus_ > 1) CHECK(s.bm_ >= 64);  // under 64 rows only once one MXU is left
      MESSAGE("K ", k, ": ", s.mxus_, " MXUs, ", s.bm_, "-row blocks, A resident ", s.a_resident_);
    }
    // What fits at full size keeps full-size blocks.
    const kernels::MatmulSchedule full(spec_of(1024, 1024, 1024), v4, true);
    CHECK(full.mxus_ == v4.mxu_per_core);
    CHECK(full.bm_ == 256);
    CHECK(full.a_resident_);
    // B's panel holds all of K: past that, even one MXU's 128 columns do not fit.
    CHECK_THROWS_WITH_AS(kernels::MatmulSchedule(spec_of(1024, 1024, 4096, DType::F32, 6), v4, true),
                         doctest::Contains("bytes of VMEM even in its smallest blocks (8 rows, one MXU), v4 has 12582912"),
                         kernels::KernelError);
  }

  TEST_CASE("a schedule that does not fit VMEM is refused before any code exists") {
    const sim::ChipConfig chip = sim::load_chip("v5e");
    // A batch keeps A out of VMEM, but a 2^20-deep K panel of B cannot fit.
    auto spec = spec_of(8, 128, int64_t{1} << 20);
    CHECK_THROWS_WITH_AS(kernels::MatmulSchedule(spec, chip, true), doctest::Contains("bytes of VMEM even in its smallest blocks"),
                         kernels::KernelError);
  }

  TEST_CASE("matmul_max_k: the longest K that fits, so a longer one can be split") {
    for (const char* name : {"v5e", "v6e", "v4"}) {
      CAPTURE(name);
      const sim::ChipConfig chip = sim::load_chip(name);
      const int64_t d = chip.mxu_dim;
      const auto fits = [&](kernels::MatmulSpec spec, int64_t k) {
        spec.k = k;
        try {
          kernels::MatmulSchedule(spec, chip, true);
          return true;
        } catch (const kernels::KernelError&) {
          return false;
        }
      };
      const auto small = spec_of(64, 256, 1000);
      CHECK(kernels::matmul_max_k(small, chip) == 1000);  // fits: K itself
      // An LM head's input gradient at 'highest': f32 [32, 50257] @ [50257, 128].
      const auto vocab = spec_of(32, 128, 50257, DType::F32, 6);
      const int64_t most = kernels::matmul_max_k(vocab, chip);
      CHECK(most > 0);
      CHECK(most < 50257);
      CHECK(most % d == 0);
      CHECK(fits(vocab, most));
      CHECK_FALSE(fits(vocab, most + d));  // the longest: one more MXU slice does not fit
    }
  }

  TEST_CASE("matmul_max_k with full-size blocks: a wide MLP's down projection is split before its blocks shrink") {
    for (const char* name : {"v5e", "v6e", "v7"}) {
      CAPTURE(name);
      const sim::ChipConfig chip = sim::load_chip(name);
      const int64_t d = chip.mxu_dim;
      auto down = spec_of(2048, 8192, 65536);  // bf16 [2048, 65536] @ W[8192, 65536]^T
      down.b_transposed = true;
      const auto full_at = [&](int64_t k) {
        auto s = down;
        s.k = k;
        return kernels::MatmulSchedule(s, chip, true).full_size_blocks();
      };
      const int64_t fitting = kernels::matmul_max_k(down, chip), full = kernels::matmul_max_k(down, chip, true);
      CHECK(full % d == 0);
      CHECK(full >= 8192);  // a Linear of the usual widths keeps one launch
      CHECK(full < fitting);
      CHECK(full_at(full));
      CHECK_FALSE(full_at(full + d));
      CHECK_FALSE(full_at(fitting));
    }
  }
}

// A convolution gradient's matmul whose K outgrows VMEM (kernels/compose/long_k_matmul.h): split
// into K slices that each fit one launch, their f32 products summed; short ones stay whole.
TEST_CASE("matmul_with_long_k: slices that fit, f32 sums, one cast") {
  const sim::ChipConfig chip = sim::load_chip("v5e");
  const auto matmuls = [](const kernels::Graph& g) {
    std::vector<const kernels::Node*> found;
    for (const auto& n : g.nodes()) {
      if (n.kind == kernels::NodeKind::MatMul) found.push_back(&n);
    }
    return found;
  };
  SUBCASE("a weight gradient: [32, 65536] @ [144, 65536]^T") {
    kernels::Graph g;
    const int a = g.input({{32, 65536}, DType::F32}), b = g.input({{144, 65536}, DType::F32});
    const int64_t most = kernels::one_launch_k(g, a, b, true, 6, chip);
    REQUIRE(most > 0);
    REQUIRE(most < 65536);
    const int y = kernels::matmul_with_long_k(g, a, b, true, 6, "conv2d_weight_grad", &chip);
    CHECK(g.node(y).type.shape == std::vector<int64_t>{32, 144});
    CHECK(g.node(y).type.dtype == DType::F32);
    const auto parts = matmuls(g);
    CHECK(parts.size() == size_t((65536 + most - 1) / most));
    int64_t total = 0;
    for (const auto* m : parts) {
      const int64_t k = g.node(m->inputs[0]).type.shape.back();
      CHECK(k <= most);
      CHECK(g.node(m->inputs[1]).type.shape.back() == k);  // b read transposed: [N, K]
      CHECK(m->type.dtype == DType::F32);
      total += k;
    }
    CHECK(total == 65536);
  }
  SUBCASE("bf16 operands: the f32 sum is cast once") {
    kernels::Graph g;
    const int a = g.input({{8, 1 << 21}, DType::BF16}), b = g.input({{1 << 21, 128}, DType::BF16});
    const int y = kernels::matmul_with_long_k(g, a, b, false, 1, "mm", &chip);
    CHECK(matmuls(g).size() > 1);
    CHECK(g.node(y).type.dtype == DType::BF16);
    CHECK(g.node(y).type.shape == std::vector<int64_t>{8, 128});
  }
  SUBCASE("A given transposed ([K, M], a weight gradient's x^T), f32 result kept") {
    kernels::Graph g;
    const int a = g.input({{1 << 21, 8}, DType::BF16}), b = g.input({{1 << 21, 128}, DType::BF16});
    const int y = kernels::matmul_with_long_k(g, a, b, false, 1, "mm", &chip, /*transpose_a=*/true, /*f32_result=*/true);
    CHECK(g.node(y).type.shape == std::vector<int64_t>{8, 128});
    CHECK(g.node(y).type.dtype == DType::F32);
    const auto parts = matmuls(g);
    REQUIRE(parts.size() > 1);
    int64_t total = 0;
    for (const auto* m : parts) {
      const int64_t k = g.node(m->inputs[0]).type.shape[0];  // A^T's rows are K
      CHECK(g.node(m->inputs[0]).type.shape[1] == 8);
      CHECK(g.node(m->inputs[1]).type.shape[0] == k);
      total += k;
    }
    CHECK(total == (1 << 21));
  }
  SUBCASE("a K that fits, or no chip: one matmul") {
    kernels::Graph g;
    const int a = g.input({{32, 4096}, DType::F32}), b = g.input({{4096, 64}, DType::F32});
    kernels::matmul_with_long_k(g, a, b, false, 6, "mm", &chip);
    const int c = g.input({{32, 65536}, DType::F32}), d = g.input({{65536, 64}, DType::F32});
    kernels::matmul_with_long_k(g, c, d, false, 6, "mm", nullptr);
    CHECK(matmuls(g).size() == 2);
  }
}
