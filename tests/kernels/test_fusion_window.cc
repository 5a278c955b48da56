// Fusion and a launch's 4 GiB address window (isa/address_window.h): groups whose operands would
// overflow it are split unless they stream flat (then their launch runs in pieces), and chains
// whose intermediates are big but whose operands fit stay one kernel (kernels/graph/fusion.cc).
#include <doctest/doctest.h>

#include "isa/address_window.h"
#include "kernels/graph/fusion.h"
#include "kernels/graph/plan.h"

using namespace vtpu;
using kernels::DType;
using kernels::ExprOp;
using kernels::FusionStrategy;

TEST_SUITE("kernels") {
  TEST_CASE("fusion: a group stops where its operands would overflow a launch's 4 GiB address window") {
    // AdamW's update of a 1 GiB bf16 embedding: parameter, gradient and both moments in, the three
    // updated tensors out, the parameter scaled by a per-column decay (a broadcast operand, so the
    // kernel cannot stream the flat data in pieces: kernels/graph/window_pieces.h). Fused as it is
    // at a small size, a kernel would see more than 4 GiB of operands; at full size every kernel
    // must fit, so there are more of them.
    const auto adamw = [](int64_t rows, bool decay_per_column = true) {
      kernels::Graph g;
      const kernels::TensorType t{{rows, 2048}, DType::BF16};
      int p = g.input(t);
      const int grad = g.input(t), m = g.input(t), v = g.input(t);
      if (decay_per_column) p = g.binary(ExprOp::Mul, p, g.input({{2048}, DType::BF16}));
      const int m2 = g.binary(ExprOp::Add, g.binary_scalar(ExprOp::Mul, m, 0.9), g.binary_scalar(ExprOp::Mul, grad, 0.1));
      const int v2 = g.binary(ExprOp::Add, g.binary_scalar(ExprOp::Mul, v, 0.999),
                              g.binary_scalar(ExprOp::Mul, g.binary(ExprOp::Mul, grad, grad), 0.001));
      g.mark_output(m2);
      g.mark_output(v2);
      g.mark_output(g.binary(ExprOp::Sub, p, g.binary(ExprOp::Div, m2, g.unary(ExprOp::Sqrt, v2))));
      return g;
    };
    const auto window_bytes = [](const kernels::Graph& g, const kernels::KernelGroup& grp) {
      std::vector<uint64_t> bytes;
      for (const auto* values : {&grp.inputs, &grp.outputs}) {
        for (int x : *values) bytes.push_back(uint64_t(g.node(x).type.numel()) * 2);
      }
      return bytes;
    };
    const kernels::Graph small = adamw(256), big = adamw(1 << 18);
    const auto small_groups = kernels::plan_fusion(small, FusionStrategy::Greedy);
    const auto big_groups = kernels::plan_fusion(big, FusionStrategy::Greedy);
    bool small_would_overflow = false;
    for (const auto& grp : small_groups) {
      auto bytes = window_bytes(small, grp);
      for (auto& b : bytes) b *= 1024;  // the same kernel at 1 << 18 rows
      small_would_overflow |= !isa::window_fits(bytes);
    }
    CHECK(small_would_overflow);
    CHECK(big_groups.size() > small_groups.size());
    for (const auto& grp : big_groups) CHECK(isa::window_fits(window_bytes(big, grp)));

    // Without the broadcast the update streams flat: as few kernels at full size as at a small
    // one, each run in launches over ranges of the elements that fit the window.
    const kernels::Graph flat = adamw(1 << 18, false);
    const auto flat_groups = kernels::plan_fusion(flat, FusionStrategy::Greedy);
    CHECK(flat_groups.size() == kernels::plan_fusion(adamw(256, false), FusionStrategy::Greedy).size());
    kernels::ProgramCache cache;
    const kernels::Plan plan = kernels::make_plan(flat, FusionStrategy::Greedy, sim::load_chip("v7"), cache);
    bool pieced = false;
    for (const auto& launch : plan.launches) {
      std::vector<uint64_t> whole;
      for (int v : launch.args) whole.push_back(uint64_t(flat.node(v).type.numel()) * 2);
      CHECK(launch.pieces.empty() == isa::window_fits(whole));
      pieced |= !launch.pieces.empty();
      for (const auto& piece : launch.pieces) {
        std::vector<uint64_t> bytes;
        for (const auto& r : piece.ranges) bytes.push_back(r.bytes);
        CHECK(isa::window_fits(bytes));
      }
    }
    CHECK(pieced);

    // torch's lerp (torch._refs.lerp, what _foreach_lerp_ of AdamW runs) of two 1 GiB bf16
    // tensors: both cast to f32 (2 GiB each), the weight's mask and coefficient (a group of one
    // element), base = where(mask, end, start), coefficient * (end - start) + base, rounded back.
    // One kernel over the big tensors, 3 GiB of operands, though its first steps alone would see
    // more and the casts start groups of their own.
    kernels::Graph lerp;
    const kernels::TensorType t{{1 << 18, 2048}, DType::BF16};
    const int a = lerp.input(t), b = lerp.input(t);
    const int fa = lerp.cast(a, DType::F32), fb = lerp.cast(b, DType::F32);  // in the order torch records them
    const int w = lerp.full({{1}, DType::F32}, 0.1);
    const int mask = lerp.binary_scalar(ExprOp::Ge, lerp.unary(ExprOp::Abs, w), 0.5);
    const int coeff = lerp.where(mask, lerp.binary_scalar(ExprOp::Sub, w, 1.0), w);
    const int base = lerp.where(mask, fb, fa);
    const int diff = lerp.binary(ExprOp::Sub, fb, fa);
    lerp.mark_output(lerp.cast(lerp.binary(ExprOp::Add, lerp.binary(ExprOp::Mul, coeff, diff), base), DType::BF16));
    const auto lerp_groups = kernels::plan_fusion(lerp, FusionStrategy::Greedy);
    int big_kernels = 0;
    for (const auto& grp : lerp_groups) {
      if (lerp.node(grp.nodes.back()).type.numel() == t.numel()) {
        ++big_kernels;
        CHECK(grp.inputs.size() == 4);  // a, b, the mask and the coefficient
      }
    }
    CHECK(big_kernels == 1);
  }
}
