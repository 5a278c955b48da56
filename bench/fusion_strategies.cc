// Fusion strategies side by side on the same workloads, in one run: a transformer MLP block
// (matmul -> +bias -> gelu -> matmul -> +bias -> +residual) and an attention block
// (q @ k^T -> *scale + causal mask -> softmax -> @ v), bf16 activations and weights on v5e.
// Prints simulated time, kernels, traffic and peak of HBM and of held VMEM (where a plan's
// intermediates live when they fit) for `none` and `greedy`, and the ratios none / greedy of time,
// bytes moved and peak (HBM and held VMEM together); the attention block also as the fused
// attention kernel (one graph node, kernels/attention/attention.h) against greedy.
#include <fmt/format.h>

#include <cmath>
#include <optional>

#include "kernels/graph/plan.h"
#include "sim/sim_device.h"
#include "torch_bridge/plan_runner/plan_runner.h"

using namespace vtpu;
using kernels::DType;
using kernels::ExprOp;

namespace {

struct Workload {
  std::string name;
  kernels::Graph graph;
  std::optional<kernels::Graph> fused;  // the same computation as one fused kernel
};

Workload mlp(int64_t tokens, int64_t d, int64_t hidden) {
  Workload w{fmt::format("MLP block {}x{} -> {} -> {}", tokens, d, hidden, d), {}, {}};
  auto& g = w.graph;
  const int x = g.input({{tokens, d}, DType::BF16}, "x");
  const int w1 = g.input({{hidden, d}, DType::BF16}, "w1");
  const int b1 = g.input({{hidden}, DType::BF16}, "b1");
  const int w2 = g.input({{d, hidden}, DType::BF16}, "w2");
  const int b2 = g.input({{d}, DType::BF16}, "b2");
  const int h = g.unary(ExprOp::GeluTanh, g.binary(ExprOp::Add, g.matmul(x, w1, true), b1));
  g.mark_output(g.binary(ExprOp::Add, g.binary(ExprOp::Add, g.matmul(h, w2, true), b2), x));
  return w;
}

Workload attention(int64_t heads, int64_t seq, int64_t dim) {
  Workload w{fmt::format("attention {} heads x {} tokens x {} dims", heads, seq, dim), {}, kernels::Graph{}};
  auto& g = w.graph;
  const int q = g.input({{heads, seq, dim}, DType::BF16}, "q");
  const int k = g.input({{heads, seq, dim}, DType::BF16}, "k");
  const int v = g.input({{heads, seq, dim}, DType::BF16}, "v");
  const int mask = g.input({{seq, seq}, DType::BF16}, "causal_mask");
  const int scores = g.matmul(q, k, true);
  const int scaled = g.binary(ExprOp::Add, g.binary_scalar(ExprOp::Mul, scores, 1.0 / std::sqrt(double(dim))), mask);
  const int p = g.row(kernels::RowOp::Softmax, scaled);
  g.mark_output(g.matmul(p, v));
  auto& f = *w.fused;
  const int fq = f.input({{heads, seq, dim}, DType::BF16}, "q"), fk = f.input({{heads, seq, dim}, DType::BF16}, "k"),
            fv = f.input({{heads, seq, dim}, DType::BF16}, "v");
  f.mark_output(f.attention(fq, fk, fv, true, 1.0 / std::sqrt(double(dim)), 1, false));
  return w;
}

bridge::PlanRun run(const kernels::Graph& g, kernels::FusionStrategy s, size_t* kernels_out) {
  sim::SimDevice device(sim::load_chip("v5e"));
  kernels::ProgramCache cache;
  const auto plan = kernels::make_plan(g, s, device.chip(), cache);
  std::map<int, sim::HbmAddress> inputs;
  for (const auto& values : {plan.inputs, plan.outputs}) {
    for (int v : values) {
      if (plan.value_bytes.count(v)) inputs[v] = device.allocate(plan.value_bytes.at(v));  // zeros: timing only
    }
  }
  bridge::PlanExecution exec(device, plan, inputs);
  *kernels_out = plan.launches.size();
  auto r = exec.run();
  r.peak_hbm_bytes = device.memory_stats().peak_allocated_bytes;  // inputs, outputs, intermediates held nowhere else
  r.peak_held_bytes = device.memory_stats().held_peak_bytes;
  return r;
}

void print_row(std::string_view name, size_t kernels, const bridge::PlanRun& r) {
  fmt::print("  {:8} {:>8} {:>14.2f} {:>10.3f} {:>10.3f} {:>12.3f} {:>12.3f}\n", name, kernels, r.seconds * 1e6,
             (r.hbm_read_bytes + r.hbm_write_bytes) / 1e6, r.held_vmem_bytes / 1e6, r.peak_hbm_bytes / 1e6,
             r.peak_held_bytes / 1e6);
}

}  // namespace

int main() {
  const Workload workloads[] = {mlp(512, 512, 2048), attention(8, 512, 64)};
  for (const auto& w : workloads) {
    fmt::print("{}\n", w.name);
    fmt::print("  {:8} {:>8} {:>14} {:>10} {:>10} {:>12} {:>12}\n", "strategy", "kernels", "simulated us", "HBM MB",
               "held MB", "HBM peak MB", "held peak MB");
    bridge::PlanRun runs[2];
    for (auto s : {kernels::FusionStrategy::None, kernels::FusionStrategy::Greedy}) {
      size_t n = 0;
      const auto r = run(w.graph, s, &n);
      runs[static_cast<int>(s)] = r;
      print_row(kernels::fusion_strategy_name(s), n, r);
    }
    const auto ratios = [](const char* what, const bridge::PlanRun& a, const bridge::PlanRun& b) {
      const auto moved = [](const bridge::PlanRun& r) { return double(r.hbm_read_bytes + r.hbm_write_bytes + r.held_vmem_bytes); };
      const auto peak = [](const bridge::PlanRun& r) { return double(r.peak_hbm_bytes + r.peak_held_bytes); };
      fmt::print("  {}: time {:.2f}x, bytes moved (HBM + held VMEM) {:.2f}x, peak (HBM + held VMEM) {:.2f}x\n", what,
                 a.seconds / b.seconds, moved(a) / moved(b), peak(a) / peak(b));
    };
    if (w.fused) {
      size_t n = 0;
      const auto r = run(*w.fused, kernels::FusionStrategy::Greedy, &n);
      print_row("fused", n, r);
      ratios("none / greedy", runs[0], runs[1]);
      ratios("greedy / fused kernel", runs[1], r);
    } else {
      ratios("none / greedy", runs[0], runs[1]);
    }
    fmt::print("\n");
  }
  return 0;
}
