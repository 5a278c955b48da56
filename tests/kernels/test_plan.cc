// Graph -> fusion groups -> plan -> run on the simulator: the groups each strategy forms, the
// memory planner's reuse, the program cache, and whole graphs against host references under both
// strategies (they must agree with each other and with the reference).
#include <doctest/doctest.h>

#include <cmath>

#include "kernels/graph/fusion.h"
#include "kernels/graph/plan.h"
#include "support/numerics.h"
#include "support/run_graph.h"

using namespace vtpu;
using kernels::DType;
using kernels::ExprOp;
using kernels::FusionStrategy;
using kernels::RowOp;

namespace {

// y = gelu(x @ w1^T + b1) @ w2^T + b2 + x: a transformer MLP block, weights as nn.Linear holds them.
struct Mlp {
  kernels::Graph g;
  int x, w1, b1, w2, b2, y;
  Mlp(int64_t tokens, int64_t d, int64_t hidden) {
    x = g.input({{tokens, d}, DType::F32}, "x");
    w1 = g.input({{hidden, d}, DType::F32}, "w1");
    b1 = g.input({{hidden}, DType::F32}, "b1");
    w2 = g.input({{d, hidden}, DType::F32}, "w2");
    b2 = g.input({{d}, DType::F32}, "b2");
    const int h = g.unary(ExprOp::GeluErf, g.binary(ExprOp::Add, g.matmul(x, w1, true, 6), b1));
    y = g.binary(ExprOp::Add, g.binary(ExprOp::Add, g.matmul(h, w2, true, 6), b2), x);
    g.mark_output(y);
  }
};

double gelu(double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }

// Random inputs of an Mlp and its double-precision output.
struct MlpCase {
  std::vector<testing::Bound> inputs;
  std::vector<double> want;
  MlpCase(const Mlp& mlp, int64_t t, int64_t d, int64_t hdim) {
    const auto x = testing::random_floats(t * d, 51), w1 = testing::random_floats(hdim * d, 52, -0.3f, 0.3f),
               b1 = testing::random_floats(hdim, 53), w2 = testing::random_floats(d * hdim, 54, -0.3f, 0.3f),
               b2 = testing::random_floats(d, 55);
    want.resize(t * d);
    for (int64_t i = 0; i < t; ++i) {
      std::vector<double> h(hdim);
      for (int64_t j = 0; j < hdim; ++j) {
        double acc = b1[j];
        for (int64_t k = 0; k < d; ++k) acc += double(x[i * d + k]) * w1[j * d + k];
        h[j] = gelu(acc);
      }
      for (int64_t j = 0; j < d; ++j) {
        double acc = b2[j] + x[i * d + j];
        for (int64_t k = 0; k < hdim; ++k) acc += h[k] * w2[j * hdim + k];
        want[i * d + j] = acc;
      }
    }
    inputs = {{mlp.x, x}, {mlp.w1, w1}, {mlp.b1, b1}, {mlp.w2, w2}, {mlp.b2, b2}};
  }
};

}  // namespace

TEST_SUITE("kernels") {
  TEST_CASE("fusion groups: none is one kernel per op, greedy fuses matmul epilogues") {
    Mlp mlp(16, 32, 64);
    const auto none = kernels::plan_fusion(mlp.g, FusionStrategy::None);
    const auto greedy = kernels::plan_fusion(mlp.g, FusionStrategy::Greedy);
    CHECK(none.size() == 6);
    REQUIRE(greedy.size() == 2);
    CHECK(greedy[0].kind == kernels::KernelGroup::Kind::MatMul);
    CHECK(greedy[0].nodes.size() == 3);  // matmul, +b1, gelu
    CHECK(greedy[0].outputs.size() == 1);
    CHECK(greedy[1].nodes.size() == 3);  // matmul, +b2, +x
    CHECK(std::find(greedy[1].inputs.begin(), greedy[1].inputs.end(), mlp.x) != greedy[1].inputs.end());
  }

  TEST_CASE("fusion: an intermediate read twice stays materialised; a row op absorbs its prologue") {
    kernels::Graph g;
    const int a = g.input({{8, 300}, DType::F32});
    const int b = g.input({{8, 300}, DType::F32});
    const int s = g.binary(ExprOp::Add, a, b);
    const int e = g.unary(ExprOp::Exp, s);
    const int n = g.row(RowOp::Softmax, g.binary_scalar(ExprOp::Mul, s, 0.5));  // s read by exp and by the scale
    const int out = g.binary(ExprOp::Add, n, e);
    g.mark_output(out);
    const auto groups = kernels::plan_fusion(g, FusionStrategy::Greedy);
    // {add, exp, mul} cannot become the softmax prologue (exp's value is read after it), so:
    // elementwise {add, exp, mul} -> softmax -> elementwise {add}
    REQUIRE(groups.size() == 3);
    CHECK(groups[0].outputs.size() == 2);  // exp (read by the final add) and mul (read by softmax)
    CHECK(groups[1].kind == kernels::KernelGroup::Kind::Row);

    kernels::Graph h;
    const int x = h.input({{8, 300}, DType::F32});
    const int y = h.input({{8, 300}, DType::F32});
    const int w = h.input({{300}, DType::F32});
    h.mark_output(h.row(RowOp::LayerNorm, h.binary(ExprOp::Add, x, y), w));
    const auto fused = kernels::plan_fusion(h, FusionStrategy::Greedy);
    REQUIRE(fused.size() == 1);
    CHECK(fused[0].kind == kernels::KernelGroup::Kind::Row);
    CHECK(fused[0].nodes.size() == 2);
  }

  TEST_CASE("fusion: subexpressions over separately copied operands share one elementwise kernel") {
    // lo and hi are two transposing strided copies (kernels of their own); a * 2 opens an
    // elementwise group, and hi + 1, whose producer is a copy made before that group, joins it
    // instead of opening another, so the compare-and-swap pattern is one kernel. x * 3 reads only
    // the graph input: a group of its own.
    kernels::Graph g;
    const int x = g.input({{4, 8}, DType::F32});
    const int lo = g.strided_copy(x, {4, 4}, {1, 8}, 0), hi = g.strided_copy(x, {4, 4}, {1, 8}, 4);
    const int a = g.binary_scalar(ExprOp::Mul, lo, 2.0), b = g.binary_scalar(ExprOp::Add, hi, 1.0);
    g.mark_output(g.binary(ExprOp::Max, a, b));
    kernels::Graph with_unrelated = g;
    with_unrelated.mark_output(with_unrelated.binary_scalar(ExprOp::Mul, x, 3.0));
    const auto groups = kernels::plan_fusion(with_unrelated, FusionStrategy::Greedy);
    REQUIRE(groups.size() == 4);  // lo, hi, {a, b, max}, {x * 3}
    CHECK(groups[2].kind == kernels::KernelGroup::Kind::Elementwise);
    CHECK(groups[2].nodes.size() == 3);
    CHECK(groups[2].outputs.size() == 1);
    CHECK(groups[3].nodes.size() == 1);
    // and it computes the same as one kernel per op
    kernels::ProgramCache cache;
    std::vector<float> data(32);
    for (int i = 0; i < 32; ++i) data[i] = float(i % 7) - 3.f;
    const auto fused = testing::run_graph(g, kernels::make_plan(g, FusionStrategy::Greedy, sim::load_chip("v5e"), cache), {{x, data}});
    const auto plain = testing::run_graph(g, kernels::make_plan(g, FusionStrategy::None, sim::load_chip("v5e"), cache), {{x, data}});
    CHECK(fused == plain);
    for (int r = 0; r < 4; ++r) {
      for (int c = 0; c < 4; ++c) CHECK(fused[r * 4 + c] == std::max(2.f * data[c * 8 + r], data[c * 8 + 4 + r] + 1.f));
    }
  }

  TEST_CASE("row kernels: a layer norm with a bias and no weight adds the bias, it does not scale by it") {
    // The row node's second input was taken for a weight whatever it was (F.layer_norm(x, s, None, b)).
    for (const bool with_weight : {false, true}) {
      kernels::Graph g;
      const int x = g.input({{3, 8}, DType::F32});
      const int w = with_weight ? g.input({{8}, DType::F32}) : -1;
      const int b = g.input({{8}, DType::F32});
      g.mark_output(g.row(RowOp::LayerNorm, x, w, b, 1e-5));
      std::vector<float> xs(24), ws(8), bs(8);
      for (int i = 0; i < 24; ++i) xs[i] = float((i * 7) % 11) - 5.f;
      for (int i = 0; i < 8; ++i) ws[i] = 0.5f + 0.25f * float(i), bs[i] = float(i) - 3.f;
      kernels::ProgramCache cache;
      std::vector<testing::Bound> inputs = {{x, xs}, {b, bs}};
      if (with_weight) inputs.push_back({w, ws});
      const auto got = testing::run_graph(g, kernels::make_plan(g, FusionStrategy::Greedy, sim::load_chip("v5e"), cache), inputs);
      for (int r = 0; r < 3; ++r) {
        double mean = 0, var = 0;
        for (int c = 0; c < 8; ++c) mean += xs[r * 8 + c] / 8.0;
        for (int c = 0; c < 8; ++c) var += (xs[r * 8 + c] - mean) * (xs[r * 8 + c] - mean) / 8.0;
        for (int c = 0; c < 8; ++c) {
          const double y = (xs[r * 8 + c] - mean) / std::sqrt(var + 1e-5) * (with_weight ? ws[c] : 1.0) + bs[c];
          CHECK(got[r * 8 + c] == doctest::Approx(y).epsilon(1e-5));
        }
      }
    }
  }

  TEST_CASE("memory planner: reuse after the last reader, never overlapping live values") {
    // a(0..1) b(1..2) c(2..3) d(3..inf): a and c can share, b and d can share.
    const auto plan = kernels::plan_memory({{0, 1000, 0, 1}, {1, 1000, 1, 2}, {2, 1000, 2, 3}, {3, 1000, 3, INT32_MAX}});
    CHECK(plan.arena_bytes == 2 * 1024);
    CHECK(plan.total_bytes == 4 * 1024);
    CHECK(plan.offset.at(0) != plan.offset.at(1));
    CHECK(plan.offset.at(1) != plan.offset.at(2));
    CHECK(plan.offset.at(2) != plan.offset.at(3));
  }

  TEST_CASE("a plan's lifetimes: each intermediate from the launch that writes it to its last reader") {
    // x -> a = exp(x) -> b = a * 2 -> y = b + x, one launch each under `none`.
    kernels::Graph g;
    const int x = g.input({{8, 256}, DType::F32}, "x");
    const int a = g.unary(ExprOp::Exp, x);
    const int b = g.binary_scalar(ExprOp::Mul, a, 2.0);
    const int y = g.binary(ExprOp::Add, b, x);
    g.mark_output(y);
    kernels::ProgramCache cache;
    const auto plan = kernels::make_plan(g, FusionStrategy::None, sim::load_chip("v5e"), cache);
    REQUIRE(plan.launches.size() == 3);
    const auto& life = plan.memory.intermediates;
    REQUIRE(life.size() == 2);  // a and b; x is the caller's, y a bound output
    CHECK(life.at(a).first_step == 0);
    CHECK(life.at(a).last_step == 1);
    CHECK(life.at(b).first_step == 1);
    CHECK(life.at(b).last_step == 2);
    CHECK(life.at(a).bytes == 8 * 256 * 4);
    CHECK(plan.memory.input_last_step.at(x) == 2);  // y's launch reads x last
    CHECK(plan.memory.arena_bytes == 2 * 8 * 256 * 4);  // a and b are both live at launch 1
  }

  TEST_CASE("MLP block under none and greedy matches a double reference; greedy moves fewer bytes") {
    const int64_t t = 24, d = 40, hdim = 136;
    Mlp mlp(t, d, hdim);
    const MlpCase data(mlp, t, d, hdim);
    const auto& inputs = data.inputs;
    const auto& want = data.want;
    kernels::ProgramCache cache;
    const auto& chip = sim::load_chip("v5e");
    bridge::PlanRun none_run, greedy_run;
    const auto none_plan = kernels::make_plan(mlp.g, FusionStrategy::None, chip, cache);
    const auto greedy_plan = kernels::make_plan(mlp.g, FusionStrategy::Greedy, chip, cache);
    const auto y_none = testing::run_graph(mlp.g, none_plan, inputs, &none_run);
    const auto y_greedy = testing::run_graph(mlp.g, greedy_plan, inputs, &greedy_run);
    // 6-pass f32 matmuls and a 1.5e-7 erf: f32-level agreement with the double reference.
    VTPU_CHECK_CLOSE(y_none, want, 1e-4, 1e-4);
    VTPU_CHECK_CLOSE(y_greedy, want, 1e-4, 1e-4);
    CHECK(none_run.launches == 6);
    CHECK(greedy_run.launches == 2);
    // Intermediates live in held VMEM (they fit), so HBM sees only inputs and outputs under either
    // strategy; what fusion saves is the traffic to and from them.
    const auto moved = [](const bridge::PlanRun& r) { return r.hbm_read_bytes + r.hbm_write_bytes + r.held_vmem_bytes; };
    MESSAGE("MLP: none ", moved(none_run), " B / ", none_run.seconds * 1e6, " us; greedy ", moved(greedy_run), " B / ",
            greedy_run.seconds * 1e6, " us");
    CHECK(none_run.held_intermediates == 5);
    CHECK(none_run.hbm_intermediates == 0);
    CHECK(moved(greedy_run) < moved(none_run));
    CHECK(greedy_run.hbm_read_bytes + greedy_run.hbm_write_bytes == none_run.hbm_read_bytes + none_run.hbm_write_bytes);
    // With too little held VMEM the intermediates take HBM: the same values, more HBM traffic and time.
    sim::ChipConfig small = chip;
    small.vmem_held_bytes = 512;
    bridge::PlanRun spilled;
    const auto y_spilled = testing::run_graph(mlp.g, none_plan, inputs, &spilled, small);
    CHECK(y_spilled == y_none);
    CHECK(spilled.held_intermediates == 0);
    CHECK(spilled.hbm_intermediates == none_run.held_intermediates);
    CHECK(spilled.hbm_read_bytes + spilled.hbm_write_bytes == moved(none_run));
    CHECK(spilled.seconds > none_run.seconds);
    CHECK(greedy_run.seconds < none_run.seconds);
    CHECK(greedy_plan.memory.arena_bytes < none_plan.memory.arena_bytes);
    // Planning the same graph again hits the cache for every kernel.
    const uint64_t hits = cache.hits();
    const auto again = kernels::make_plan(mlp.g, FusionStrategy::Greedy, chip, cache);
    CHECK(cache.hits() == hits + again.launches.size());
    for (const auto& l : again.launches) CHECK(l.cache_hit);
    CHECK(kernels::graph_signature(mlp.g) == kernels::graph_signature(Mlp(t, d, hdim).g));
    CHECK(kernels::graph_signature(mlp.g) != kernels::graph_signature(Mlp(t, d, hdim + 1).g));
  }

  TEST_CASE("token counts in one power-of-two bucket share every program (rows are launch arguments)") {
    const int64_t d = 40, hdim = 136;
    kernels::ProgramCache cache;
    const auto& chip = sim::load_chip("v5e");
    for (FusionStrategy strategy : {FusionStrategy::None, FusionStrategy::Greedy}) {  // elementwise, matmul kernels
      for (auto [tokens, reused] : {std::pair<int64_t, bool>{24, false}, {17, true}, {32, true}, {33, false}, {64, true}}) {
        CAPTURE(tokens);
        Mlp mlp(tokens, d, hdim);
        const MlpCase data(mlp, tokens, d, hdim);
        const auto plan = kernels::make_plan(mlp.g, strategy, chip, cache);
        for (const auto& l : plan.launches) CHECK(l.cache_hit == reused);
        VTPU_CHECK_CLOSE(testing::run_graph(mlp.g, plan, data.inputs), data.want, 1e-4, 1e-4);
      }
    }
  }

  TEST_CASE("attention block with a [S, S] causal mask broadcast over heads (periodic layout)") {
    const int64_t heads = 3, seq = 24, dim = 20;
    kernels::Graph g;
    const int q = g.input({{heads, seq, dim}, DType::F32});
    const int k = g.input({{heads, seq, dim}, DType::F32});
    const int v = g.input({{heads, seq, dim}, DType::F32});
    const int mask = g.input({{seq, seq}, DType::F32});
    const int scores = g.binary(ExprOp::Add, g.binary_scalar(ExprOp::Mul, g.matmul(q, k, true, 6), 0.25), mask);
    g.mark_output(g.matmul(g.row(RowOp::Softmax, scores), v, false, 6));
    const auto qd = testing::random_floats(heads * seq * dim, 61), kd = testing::random_floats(heads * seq * dim, 62),
               vd = testing::random_floats(heads * seq * dim, 63);
    std::vector<float> md(seq * seq, 0.f);
    for (int64_t i = 0; i < seq; ++i) {
      for (int64_t j = i + 1; j < seq; ++j) md[i * seq + j] = -INFINITY;
    }
    std::vector<double> want(heads * seq * dim, 0.0);
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t i = 0; i < seq; ++i) {
        std::vector<double> p(seq);
        double m = -INFINITY, sum = 0;
        for (int64_t j = 0; j < seq; ++j) {
          double dot = 0;
          for (int64_t c = 0; c < dim; ++c) dot += double(qd[(h * seq + i) * dim + c]) * kd[(h * seq + j) * dim + c];
          p[j] = dot * 0.25 + md[i * seq + j];
          m = std::max(m, p[j]);
        }
        for (auto& x : p) sum += (x = std::exp(x - m));
        for (int64_t c = 0; c < dim; ++c) {
          double acc = 0;
          for (int64_t j = 0; j < seq; ++j) acc += p[j] / sum * vd[(h * seq + j) * dim + c];
          want[(h * seq + i) * dim + c] = acc;
        }
      }
    }
    kernels::ProgramCache cache;
    for (auto s : {FusionStrategy::None, FusionStrategy::Greedy}) {
      CAPTURE(kernels::fusion_strategy_name(s));
      const auto plan = kernels::make_plan(g, s, sim::load_chip("v5e"), cache);
      const auto out = testing::run_graph(g, plan, {{q, qd}, {k, kd}, {v, vd}, {mask, md}});
      VTPU_CHECK_CLOSE(out, want, 1e-5, 1e-4);
    }
  }

  TEST_CASE("graph errors: shapes that do not broadcast, matmul inner dims, unknown strategy") {
    kernels::Graph g;
    const int a = g.input({{3, 4}, DType::F32});
    const int b = g.input({{5, 4}, DType::F32});
    CHECK_THROWS_WITH_AS(g.binary(ExprOp::Add, a, b), doctest::Contains("do not broadcast"), kernels::KernelError);
    CHECK_THROWS_WITH_AS(g.matmul(a, b), doctest::Contains("inner dimensions differ"), kernels::KernelError);
    CHECK_THROWS_WITH_AS(kernels::fusion_strategy_from_name("aggressive"), doctest::Contains("none, greedy"),
                         kernels::KernelError);
    CHECK_THROWS_WITH_AS(g.input({{2}, DType::I64}), doctest::Contains("i64 tensors are not supported"), kernels::KernelError);
  }
}

TEST_SUITE("kernels") {
  TEST_CASE("a scalar operand reaches every row of a row kernel's prologue (argmax's pattern)") {
    // Regression: the scalar's broadcast load borrowed mask register m1, which a row kernel holds
    // for its per-row stores, so only every eighth row was written.
    for (bool constant : {false, true}) {
      kernels::Graph g;
      const int x = g.input({{16, 5}, DType::F32}, "x");
      const int five = g.input({{1}, DType::F32}, "five");
      const int max = g.reshape(g.row(RowOp::Max, x), {16, 1});
      const int none = constant ? g.full({{1}, DType::F32}, 5.0) : five;
      const int position = g.where(g.binary(ExprOp::Eq, x, max), g.iota({{5}, DType::F32}), none);
      g.mark_output(g.row(RowOp::Min, position));
      kernels::ProgramCache cache;
      const auto plan = kernels::make_plan(g, FusionStrategy::Greedy, sim::load_chip("v5e"), cache);
      const auto xd = testing::random_floats(80, 3);
      std::vector<double> want(16);
      for (int r = 0; r < 16; ++r) {
        int best = 0;
        for (int c = 1; c < 5; ++c) best = xd[r * 5 + c] > xd[r * 5 + best] ? c : best;
        want[r] = best;
      }
      CAPTURE(constant);
      VTPU_CHECK_CLOSE(testing::run_graph(g, plan, {{x, xd}, {five, {5.f}}}), want, 0, 0);
    }
  }
}

TEST_SUITE("kernels") {
  TEST_CASE("parts of a result are read where they lie, under both strategies") {
    // y = exp(x) written once; its second and third row groups read as parts (offsets into y's
    // buffer, no copy kernel), a part of a part included.
    for (const FusionStrategy strategy : {FusionStrategy::None, FusionStrategy::Greedy}) {
      kernels::Graph g;
      const int x = g.input({{4, 256}, DType::F32}, "x");
      const int y = g.unary(ExprOp::Exp, x);
      const int second = g.part(y, 256 * 4, {{256}, DType::F32});
      const int tail = g.part(g.part(y, 512 * 4, {{2, 256}, DType::F32}), 256 * 4, {{1, 256}, DType::F32});  // row 3
      g.mark_output(g.binary(ExprOp::Sub, g.binary(ExprOp::Mul, second, g.binary_scalar(ExprOp::Add, y, 1)), tail));
      kernels::ProgramCache cache;
      const auto plan = kernels::make_plan(g, strategy, sim::load_chip("v5e"), cache);
      for (const auto& launch : plan.launches) CHECK(launch.label.find("contiguous") == std::string::npos);
      const auto xd = testing::random_floats(1024, 7);
      std::vector<double> want(1024);
      for (int r = 0; r < 4; ++r) {
        for (int c = 0; c < 256; ++c) {
          want[r * 256 + c] = std::exp(double(xd[256 + c])) * (std::exp(double(xd[r * 256 + c])) + 1) -
                              std::exp(double(xd[768 + c]));
        }
      }
      CAPTURE(kernels::fusion_strategy_name(strategy));
      VTPU_CHECK_CLOSE(testing::run_graph(g, plan, {{x, xd}}), want, 1e-5, 1e-5);
    }
    kernels::Graph g;
    const int y = g.input({{4, 256}, DType::F32}, "y");
    CHECK_THROWS_WITH_AS(g.part(y, 900 * 4, {{256}, DType::F32}), doctest::Contains("from byte 3600 of"),
                         kernels::KernelError);
    CHECK_THROWS_WITH_AS(g.part(y, 0, {{256}, DType::I64}), doctest::Contains("from byte 0 of"), kernels::KernelError);
  }
}
