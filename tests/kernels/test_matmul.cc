// The matmul generator on the simulator: bf16 and f32 (1/3/6 passes) against Eigen references
// with error bounds derived from the bf16 splits, ragged shapes, transposed and shared B,
// batches, fused epilogues, and simulated cycles against the closed-form roofline.
#include <doctest/doctest.h>

#include <Eigen/Core>
#include <cmath>
#include <functional>
#include <limits>

#include "isa/disassembler.h"
#include "kernels/generators/matmul.h"
#include "kernels/generators/matmul_schedule.h"
#include "sim/bf16.h"
#include "sim/f16.h"
#include "sim/sim_error.h"
#include "support/numerics.h"
#include "support/run_program.h"

using namespace vtpu;
using kernels::DType;
using kernels::ExprOp;
using kernels::Layout;
using kernels::ValueType;
using Mat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

namespace {

testing::HostBuffer as_dtype(const std::vector<float>& v, DType t) {
  if (t == DType::F32) return testing::HostBuffer::of(v);
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = t == DType::BF16 ? sim::f32_to_bf16_bits(v[i]) : sim::f32_to_f16_bits(v[i]);
  return testing::HostBuffer::of(out);
}

// The values the chip sees for an operand of dtype t.
std::vector<float> seen(const std::vector<float>& v, DType t) {
  if (t == DType::F32) return v;
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = t == DType::BF16 ? sim::round_to_bf16(v[i]) : sim::round_to_f16(v[i]);
  return out;
}

struct Result {
  std::vector<float> c;
  Mat ref, mag;  // exact product (double) and sum |a||b| per element, per batch stacked
  sim::LaunchResult launch;
};

// Edits the random inputs before a run: A as [batch, M, K], B as the kernel reads it.
using EditInputs = std::function<void(std::vector<float>& a, std::vector<float>& w)>;

// Runs spec on random inputs; `extra` are epilogue inputs (already in their dtype). `rows`,
// `cols`, `depth`: the M, N and K passed at launch (default spec's, the most the program serves).
Result run(const kernels::MatmulSpec& spec, const std::string& chip = "v5e", std::vector<testing::HostBuffer> extra = {},
           int64_t rows = 0, int64_t cols = 0, int64_t depth = 0, const EditInputs& edit = {}) {
  const int64_t b = spec.batch, m = rows > 0 ? rows : spec.m, n = cols > 0 ? cols : spec.n, k = depth > 0 ? depth : spec.k;
  const int64_t b_count = spec.b_shared ? 1 : b;
  auto a = testing::random_floats(b * m * k, 21, -1, 1);
  auto w = testing::random_floats(b_count * k * n, 22, -1, 1);
  if (edit) edit(a, w);
  std::vector<float> a_given = a;  // A as the kernel reads it: [b, K, M] when transposed
  if (spec.a_transposed) {
    for (int64_t bi = 0; bi < b; ++bi) {
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t kk = 0; kk < k; ++kk) a_given[bi * m * k + kk * m + i] = a[bi * m * k + i * k + kk];
      }
    }
  }
  std::vector<testing::Arg> args = {testing::Arg::buf(as_dtype(a_given, spec.a_dtype)), testing::Arg::buf(as_dtype(w, spec.b_dtype))};
  for (auto& e : extra) args.push_back(testing::Arg::buf(std::move(e)));
  args.push_back(testing::Arg::buf(testing::HostBuffer{std::vector<uint8_t>(b * m * n * kernels::dtype_bytes(spec.out_dtype))}));
  const size_t c_index = args.size() - 1;
  // the launch's shape, unchecked: a shape outside the program must trap on the chip
  for (int64_t v : {m, n, k}) args.push_back(testing::Arg::val(int32_t(v)));
  const auto program = kernels::make_matmul(spec, sim::load_chip(chip));
  auto out = testing::run_program(program, args, chip);
  Result r;
  r.launch = out.result;
  if (spec.out_dtype != DType::F32) {
    const auto bits = out.buffers[c_index].as<uint16_t>();
    for (uint16_t x : bits) r.c.push_back(spec.out_dtype == DType::BF16 ? sim::bf16_bits_to_f32(x) : sim::f16_bits_to_f32(x));
  } else {
    r.c = out.buffers[c_index].as<float>();
  }
  const auto as = seen(a, spec.a_dtype), ws = seen(w, spec.b_dtype);
  r.ref.resize(b * m, n);
  r.mag.resize(b * m, n);
  for (int64_t bi = 0; bi < b; ++bi) {
    Mat A(m, k), B(k, n);
    for (int64_t i = 0; i < m * k; ++i) A.data()[i] = as[bi * m * k + i];
    const int64_t wb = spec.b_shared ? 0 : bi;
    for (int64_t kk = 0; kk < k; ++kk) {
      for (int64_t j = 0; j < n; ++j) {
        B(kk, j) = spec.b_transposed ? ws[wb * k * n + j * k + kk] : ws[wb * k * n + kk * n + j];
      }
    }
    r.ref.middleRows(bi * m, m) = A * B;
    r.mag.middleRows(bi * m, m) = A.cwiseAbs() * B.cwiseAbs();
  }
  return r;
}

// Worst |c - ref| / (sum |a||b|) over all elements.
double worst_relative(const Result& r) {
  double worst = 0;
  for (Eigen::Index i = 0; i < r.ref.size(); ++i) {
    worst = std::max(worst, std::fabs(r.c[i] - r.ref.data()[i]) / (r.mag.data()[i] + 1e-30));
  }
  return worst;
}

kernels::MatmulSpec spec_of(int64_t m, int64_t n, int64_t k, DType t = DType::BF16) {
  kernels::MatmulSpec s;
  s.m = m;
  s.n = n;
  s.k = k;
  s.a_dtype = s.b_dtype = t;
  return s;
}

}  // namespace

TEST_SUITE("kernels") {
  TEST_CASE("bf16 matmul over ragged shapes: f32 accumulation of exact products") {
    for (auto [m, n, k] : {std::array<int64_t, 3>{1, 1, 1}, {7, 129, 1000}, {129, 7, 300}, {256, 512, 384}, {1000, 130, 129}}) {
      CAPTURE(m);
      CAPTURE(n);
      CAPTURE(k);
      const auto r = run(spec_of(m, n, k));
      // Both sides sum exact products in f32 in some order: within K * 2^-24 * sum|ab| each.
      CHECK(worst_relative(r) <= 2.0 * k * std::ldexp(1.0, -24));
    }
  }

  TEST_CASE("f16 at 6 passes: two exact bf16 parts per operand, so exact products as the CPU's f32 accumulation") {
    for (auto [m, n, k] : {std::array<int64_t, 3>{7, 129, 1000}, {200, 300, 130}}) {
      auto spec = spec_of(m, n, k, DType::F16);
      spec.passes = 6;
      const auto r = run(spec);
      CHECK(worst_relative(r) <= 2.0 * k * std::ldexp(1.0, -24));
      spec.out_dtype = DType::F16;  // then rounded once to f16 (relative 2^-11 of each result)
      const auto rounded = run(spec);
      for (Eigen::Index i = 0; i < rounded.ref.size(); ++i) {
        CHECK(std::fabs(rounded.c[i] - r.c[i]) <= std::ldexp(std::fabs(r.c[i]), -11) + std::ldexp(1.0, -24));
      }
    }
    auto one_pass = spec_of(64, 128, 512, DType::F16);  // one pass rounds the operands to bf16: visibly worse
    CHECK(worst_relative(run(one_pass)) > 4 * 512 * std::ldexp(1.0, -24));
  }

  TEST_CASE("v6e's 256-wide MXUs give the same answers") {
    const auto r = run(spec_of(300, 700, 520), "v6e");
    CHECK(worst_relative(r) <= 2.0 * 520 * std::ldexp(1.0, -24));
  }

  TEST_CASE("f32 precision passes: each split tightens the error as the bf16 parts predict") {
    const int64_t k = 515;
    double errors[3];
    int i = 0;
    for (int passes : {1, 3, 6}) {
      auto s = spec_of(100, 200, k, DType::F32);
      s.passes = passes;
      errors[i++] = worst_relative(run(s));
    }
    MESSAGE("worst error / sum|ab|: 1 pass ", errors[0], ", 3 passes ", errors[1], ", 6 passes ", errors[2]);
    // 1 pass: each operand rounded to bf16 (8 bits): |error| <= (2 * 2^-9 + 2^-18) per product.
    CHECK(errors[0] <= 2 * std::ldexp(1.0, -8));
    // 3 passes: the omitted lo*lo and residual terms are below 2^-16 relative, plus f32 sums.
    CHECK(errors[1] <= std::ldexp(1.0, -15) + 2.0 * k * std::ldexp(1.0, -24));
    // 6 passes: as accurate as an f32 GEMM.
    CHECK(errors[2] <= 4.0 * k * std::ldexp(1.0, -24));
    CHECK(errors[1] < errors[0] / 16);
    CHECK(errors[2] < errors[1]);
    CHECK(kernels::passes_for_precision("high") == 3);
    CHECK_THROWS_AS(kernels::passes_for_precision("fast"), kernels::KernelError);
  }

  TEST_CASE("infinities and NaN propagate as an f32 GEMM's at 3 and 6 passes, B as given or transposed, mixed dtypes") {
    // The CPU's f32 GEMM: a NaN term (a NaN operand, inf * 0) or +inf beside -inf gives NaN, an
    // infinite term its infinity. Splitting an infinity into bf16 parts gave NaN wherever it met
    // a value bf16 holds exactly (its part 1 is 0): every pass but the leading one multiplies
    // finite forms (kernels/codegen/bf16_parts.h).
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    const int64_t m = 24, n = 200, k = 300;
    for (auto [ta, tb] : {std::pair{DType::F32, DType::F32}, {DType::F32, DType::BF16}, {DType::BF16, DType::F32}, {DType::F16, DType::F32}}) {
      for (int passes : {3, 6}) {
        for (bool transposed : {false, true}) {
          for (const char* chip : {"v5e", "v6e"}) {
            CAPTURE(kernels::dtype_name(ta));
            CAPTURE(kernels::dtype_name(tb));
            CAPTURE(passes);
            CAPTURE(transposed);
            CAPTURE(chip);
            auto spec = spec_of(m, n, k, ta);
            spec.b_dtype = tb;
            spec.passes = passes;
            spec.b_transposed = transposed;
            std::vector<float> a_in, w_in;
            const auto at_b = [&](int64_t kk, int64_t j) { return transposed ? j * k + kk : kk * n + j; };
            const auto r = run(spec, chip, {}, 0, 0, 0, [&](std::vector<float>& a, std::vector<float>& w) {
              for (int64_t kk = 0; kk < k; ++kk) w[at_b(kk, 7)] = 1.0f;  // column 7: exact in bf16
              w[at_b(5, 9)] = 0.0f;
              a[0 * k + 5] = inf;    // row 0 meets a zero in column 9 only
              a[1 * k + 8] = -inf;
              a[2 * k + 11] = nan;
              w[at_b(20, 3)] = inf;  // column 3: every row but 4 and 5 meets it
              a[4 * k + 20] = 0.0f;
              a[5 * k + 20] = -inf;
              a[6 * k + 30] = inf;  // row 6: +inf and -inf terms in column 12
              w[at_b(31, 12)] = -inf;
              a[6 * k + 31] = 1.0f;
              a_in = a;
              w_in = w;
            });
            const auto as = seen(a_in, ta), ws = seen(w_in, tb);
            int non_finite = 0;
            for (int64_t i = 0; i < m; ++i) {
              for (int64_t j = 0; j < n; ++j) {
                bool nan_term = false, plus = false, minus = false;
                double sum = 0, mag = 0;
                for (int64_t kk = 0; kk < k; ++kk) {
                  const double t = double(as[i * k + kk]) * double(ws[at_b(kk, j)]);
                  nan_term |= std::isnan(t);
                  plus |= t == inf;
                  minus |= t == -inf;
                  if (std::isfinite(t)) sum += t, mag += std::fabs(t);
                }
                const float got = r.c[i * n + j];
                CAPTURE(i);
                CAPTURE(j);
                if (nan_term || (plus && minus)) {
                  CHECK(std::isnan(got));
                } else if (plus || minus) {
                  CHECK(got == (plus ? inf : -inf));
                } else {
                  CHECK(std::fabs(got - sum) <= std::ldexp(1.0, -15) * mag + 1e-30);
                }
                non_finite += !std::isfinite(got);
              }
            }
            CHECK(non_finite >= 2 * n);  // rows 0, 1, 2 and 5 and most of column 3
          }
        }
      }
    }
  }

  TEST_CASE("B given transposed (a Linear weight): f32 staged; bf16 loaded by mxu.lw.t, as fast as B as given") {
    auto f32 = spec_of(70, 300, 200, DType::F32);
    f32.b_transposed = true;
    f32.passes = 6;
    CHECK(worst_relative(run(f32)) <= 4.0 * 200 * std::ldexp(1.0, -24));
    // Ragged sizes, 128- and 256-wide MXUs, one and two TensorCores: B [K, N]'s cycles (+0.15% on a real v5e).
    for (const std::string chip : {"v5e", "v6e", "v7"}) {
      CAPTURE(chip);
      auto transposed = spec_of(600, 1100, 700);
      transposed.b_transposed = true;
      const Result t = run(transposed, chip), p = run(spec_of(600, 1100, 700), chip);
      CHECK(worst_relative(t) <= 2.0 * 700 * std::ldexp(1.0, -24));
      CHECK(double(t.launch.cycles) == doctest::Approx(double(p.launch.cycles)).epsilon(0.005));
      CHECK(isa::disassemble(kernels::make_matmul(transposed, sim::load_chip(chip))).find("mxu.lw.t") != std::string::npos);
    }
  }

  TEST_CASE("A given transposed (x^T of a weight gradient): ragged M and K, bf16 and f32, batched, v6e") {
    struct Case {
      int64_t m, n, k, batch;
      DType t;
      bool b_transposed;
      const char* chip;
    };
    for (const Case& c : {Case{128, 384, 128, 1, DType::F32, false, "v5e"}, Case{7, 129, 1000, 1, DType::BF16, false, "v5e"},
                          Case{300, 64, 129, 1, DType::F32, true, "v5e"}, Case{64, 64, 32, 8, DType::F32, false, "v5e"},
                          Case{520, 200, 300, 1, DType::BF16, false, "v6e"}}) {
      CAPTURE(c.m);
      CAPTURE(c.k);
      CAPTURE(c.chip);
      auto s = spec_of(c.m, c.n, c.k, c.t);
      s.a_transposed = true;
      s.b_transposed = c.b_transposed;
      s.batch = c.batch;
      s.passes = c.t == DType::F32 ? 6 : 1;
      CHECK(worst_relative(run(s, c.chip)) <= 4.0 * c.k * std::ldexp(1.0, -24));
    }
  }

  TEST_CASE("batched matmul, with B per batch and B shared") {
    for (bool shared : {false, true}) {
      CAPTURE(shared);
      auto s = spec_of(40, 150, 130);
      s.batch = 3;
      s.b_shared = shared;
      CHECK(worst_relative(run(s)) <= 2.0 * 130 * std::ldexp(1.0, -24));
    }
  }

  TEST_CASE("fused epilogue: gelu(acc + bias) * scale + residual, bf16 out") {
    // one block; and 3 row blocks x 3 column passes, where the next panels stream across passes
    for (auto [m, n, k] : {std::array<int64_t, 3>{50, 260, 70}, {600, 1100, 300}}) {
      CAPTURE(m);
      auto s = spec_of(m, n, k);
      s.out_dtype = DType::BF16;
      s.epilogue_inputs = {{DType::F32, Layout::Row}, {DType::F32, Layout::Full}, {DType::F32, Layout::Scalar}};
      kernels::Expr e;
      const int biased = e.binary(ExprOp::Add, e.input(0, ValueType::F32), e.input(1, ValueType::F32));
      const int act = e.unary(ExprOp::GeluTanh, biased);
      e.add_output(e.binary(ExprOp::Add, e.binary(ExprOp::Mul, act, e.input(3, ValueType::F32)), e.input(2, ValueType::F32)));
      s.epilogue = e;
      const auto bias = testing::random_floats(n, 31), residual = testing::random_floats(m * n, 32);
      const std::vector<float> scale = {0.75f};
      const auto r = run(s, "v5e", {testing::HostBuffer::of(bias), testing::HostBuffer::of(residual), testing::HostBuffer::of(scale)});
      std::vector<double> want(m * n);
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          const double x = r.ref(i, j) + bias[j];
          const double g = 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
          want[i * n + j] = g * 0.75 + residual[i * n + j];
        }
      }
      VTPU_CHECK_CLOSE(r.c, want, 1e-4, 1.0 / 128);  // bf16 output: half an ulp of 8 bits, plus f32 noise
    }
  }

  TEST_CASE("1024^3 bf16 on v5e: never below the roofline, close to it") {
    const auto r = run(spec_of(1024, 1024, 1024));
    const auto chip = sim::load_chip("v5e");
    const double flops = 2.0 * 1024 * 1024 * 1024, bytes = 1024.0 * 1024 * (2 + 2 + 4);
    const double bound = std::max(flops / chip.model_peak_flops(1), bytes / chip.sustained_hbm_bytes_per_s());
    const double simulated = r.launch.summary.seconds();
    MESSAGE("generated 1024^3 matmul: ", simulated * 1e6, " us simulated, bound ", bound * 1e6, " us, ratio ", simulated / bound);
    CHECK(r.launch.summary.hbm_read_bytes + r.launch.summary.hbm_write_bytes == uint64_t(bytes));
    CHECK(simulated >= bound);
    // ~1.21x: at this size compute (10.9 us) and minimum traffic (10.2 us) nearly tie, so the
    // first block (which must load a whole B panel and its A panel while computing one block)
    // and the last block's write-back stay exposed; bench/matmul_roofline tracks other sizes.
    CHECK(simulated <= 1.25 * bound);
  }

  TEST_CASE("M is a launch argument: a program sized for 600 rows serves any M up to 600 and traps past it") {
    const int64_t n = 200, k = 150;
    auto s = spec_of(600, n, k);
    s.epilogue_inputs = {{DType::F32, Layout::Column}, {DType::F32, Layout::Full}};
    kernels::Expr e;  // acc * scale[row] + residual
    e.add_output(e.binary(ExprOp::Add, e.binary(ExprOp::Mul, e.input(0, ValueType::F32), e.input(1, ValueType::F32)),
                          e.input(2, ValueType::F32)));
    s.epilogue = e;
    for (int64_t m : {1, 9, 256, 300, 600}) {  // one tile; one short block; one full block; ragged last blocks
      CAPTURE(m);
      const auto scale = testing::random_floats(m, 33), residual = testing::random_floats(m * n, 34);
      const auto r = run(s, "v5e", {testing::HostBuffer::of(scale), testing::HostBuffer::of(residual)}, m);
      REQUIRE(r.c.size() == size_t(m * n));
      std::vector<double> want(m * n);
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) want[i * n + j] = r.ref(i, j) * scale[i] + residual[i * n + j];
      }
      VTPU_CHECK_CLOSE(r.c, want, 1e-5, 1e-5);
    }
    auto batched = spec_of(64, 150, 130);  // per-batch strides follow the launch's M
    batched.batch = 3;
    CHECK(worst_relative(run(batched, "v5e", {}, 40)) <= 2.0 * 130 * std::ldexp(1.0, -24));
    const auto too_many = [&] { run(spec_of(600, n, k), "v5e", {}, 601); };
    CHECK_THROWS_WITH_AS(too_many(), doctest::Contains("trap #1"), sim::SimError);
  }

  TEST_CASE("N and K are launch arguments: one program per column block and per number of K slices") {
    // Scores Q @ K^T ([B*H, S, d] @ [d, S]: N = S) and probs @ V (K = S) for sequence lengths in
    // one window of 128 share the program generated for 128.
    for (int64_t seq : {1, 40, 127, 128}) {
      CAPTURE(seq);
      auto scores = spec_of(128, 128, 32, DType::F32);
      scores.batch = 3;
      scores.b_transposed = true;  // K^T read from the dense [S, d] keys
      scores.passes = 3;
      // 3 passes drop lo(a) * lo(b), at most 2^-18 of each |ab|, and round the lo parts to bf16
      // (2^-17): within 2^-16 of sum |ab| with f32 accumulation on top.
      CHECK(worst_relative(run(scores, "v5e", {}, seq, seq, 32)) <= std::ldexp(1.0, -16));
      auto probs_v = spec_of(128, 32, 128, DType::BF16);
      probs_v.batch = 3;
      const int64_t k = seq;
      CHECK(worst_relative(run(probs_v, "v5e", {}, seq, 32, k)) <= 2.0 * k * std::ldexp(1.0, -24));
    }
    // wider than the core's MXUs (v5e: 4 x 128): column blocks counted at launch; a [N] bias
    // epilogue follows the launch's N; K over several slices, the last ragged
    auto wide = spec_of(64, 1024, 384);
    wide.epilogue_inputs = {{DType::F32, Layout::Row}};
    kernels::Expr e;
    e.add_output(e.binary(ExprOp::Add, e.input(0, ValueType::F32), e.input(1, ValueType::F32)));
    wide.epilogue = e;
    const int64_t n = 700, k = 300;
    const auto bias = testing::random_floats(n, 33);
    const auto r = run(wide, "v5e", {testing::HostBuffer::of(bias)}, 50, n, k);
    std::vector<double> want(50 * n);
    for (int64_t i = 0; i < 50; ++i) {
      for (int64_t j = 0; j < n; ++j) want[i * n + j] = r.ref(i, j) + bias[j];
    }
    VTPU_CHECK_CLOSE(r.c, want, 2.0 * k * std::ldexp(1.0, -24) * 3 * 3, 1e-5);
    // the same work costs the same cycles in the shared program as in one generated for it
    const auto exact = run(spec_of(40, 40, 40)).launch.cycles, shared = run(spec_of(64, 128, 128), "v5e", {}, 40, 40, 40).launch.cycles;
    MESSAGE("40x40x40: exact program ", exact, " cycles, program for 64x128x128 ", shared, " cycles");
    CHECK(shared <= exact * 1.02);
    // shapes outside the program trap on the chip, and are refused before launch
    const auto chip = sim::load_chip("v5e");
    const auto too_wide = [&] { run(spec_of(64, 128, 128), "v5e", {}, 64, 129, 128); };
    CHECK_THROWS_WITH_AS(too_wide(), doctest::Contains("trap #1"), sim::SimError);
    const auto too_shallow = [&] { run(spec_of(64, 128, 256), "v5e", {}, 64, 128, 128); };  // would skip a slice's data
    CHECK_THROWS_WITH_AS(too_shallow(), doctest::Contains("trap #1"), sim::SimError);
    CHECK_THROWS_WITH_AS(kernels::matmul_scalars(spec_of(64, 128, 256), chip, 64, 128, 100), doctest::Contains("does not fit"),
                         kernels::KernelError);
    CHECK(kernels::matmul_scalars(spec_of(64, 128, 256), chip, 10, 1, 129) == std::vector<int32_t>{10, 1, 129});
  }

  TEST_CASE("column passes overlap: next B panels stream across a pass, first-pass write-backs wait for the second") {
    const auto text_of = [](const kernels::MatmulSpec& s, const char* chip) {
      return isa::disassemble(kernels::make_matmul(s, sim::load_chip(chip)));
    };
    // v5e, 512 columns a block: N = 1100 makes three passes and M = 600 three row blocks, so the
    // next panels go out on dq2 during the passes before; a launch of one row block (M = 200)
    // leaves them to their first block, as before.
    const auto wide = spec_of(600, 1100, 300);
    CHECK(text_of(wide, "v5e").find("dma.h2v dq2") != std::string::npos);
    for (int64_t m : {600, 200}) {
      CAPTURE(m);
      CHECK(worst_relative(run(wide, "v5e", {}, m)) <= 2.0 * 300 * std::ldexp(1.0, -24));
    }
    // v6e, 2048 x 1100 x 2048: the first pass reads A and two panels and would be memory-bound,
    // the second has HBM to spare, so the first pass's C tiles (sem5) are written back in it.
    // M is a launch argument: 2048 (8 row blocks), 1000 (4, the last ragged) and 200 (1).
    const auto deep = spec_of(2048, 1100, 2048);
    CHECK(text_of(deep, "v6e").find("sem5") != std::string::npos);
    CHECK(text_of(spec_of(2048, 1100, 1024), "v6e").find("sem5") == std::string::npos);  // no room: not deferred
    for (int64_t m : {2048, 1000, 200}) {
      CAPTURE(m);
      CHECK(worst_relative(run(deep, "v6e", {}, m)) <= 2.0 * 2048 * std::ldexp(1.0, -24));
    }
  }

  TEST_CASE("a program sized for more rows costs what one generated for the launch's M costs") {
    for (auto [m, capacity] : {std::pair<int64_t, int64_t>{40, 64}, {300, 512}, {1000, 1024}}) {
      CAPTURE(m);
      const auto exact = run(spec_of(m, 512, 256)).launch.cycles;
      const auto sized = run(spec_of(capacity, 512, 256), "v5e", {}, m).launch.cycles;
      MESSAGE("M ", m, ": generated for M ", exact, " cycles, for ", capacity, " rows ", sized, " cycles");
      CHECK(sized <= exact * 1.02);
    }
  }

  TEST_CASE("a matmul too large for VMEM in full-size blocks runs in smaller ones, as accurately") {
    // f32 at 'highest' on v4: 1024 x 384 x 2048 does not fit in blocks of all 4 MXUs' columns;
    // B transposed too (a Linear weight, staged through vtrans).
    for (bool b_transposed : {false, true}) {
      CAPTURE(b_transposed);
      auto s = spec_of(1024, 384, 2048, DType::F32);
      s.passes = 6;
      s.b_transposed = b_transposed;
      const sim::ChipConfig& v4 = sim::load_chip("v4");
      const kernels::MatmulSchedule schedule(s, v4, true);
      CHECK(schedule.mxus_ < v4.mxu_per_core);
      CHECK(worst_relative(run(s, "v4")) <= 4.0 * 2048 * std::ldexp(1.0, -24));
    }
  }

  TEST_CASE("matmul errors name the problem") {
    auto s = spec_of(4, 4, 4);
    s.a_dtype = DType::I32;
    CHECK_THROWS_WITH_AS(kernels::make_matmul(s, sim::load_chip("v5e")), doctest::Contains("i32 operands are not supported"),
                         kernels::KernelError);
    s = spec_of(4, 4, 4, DType::F32);
    s.passes = 2;
    CHECK_THROWS_WITH_AS(kernels::make_matmul(s, sim::load_chip("v5e")), doctest::Contains("2 passes"), kernels::KernelError);
    s = spec_of(1 << 16, 1 << 16, 1 << 12);
    CHECK_THROWS_WITH_AS(kernels::make_matmul(s, sim::load_chip("v4")), doctest::Contains("too large"), kernels::KernelError);
  }
}
