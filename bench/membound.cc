// Memory-bound kernels as the planner lowers them (kernels/graph): clone, x + 1, x * y, a bf16 ->
// f32 cast and a sum over the last dim, over 1-D, 2-D wide and narrow, 3-D and strided (every
// other row of a wider tensor) bf16 inputs, on every preset. Prints the simulated time and the
// achieved fraction of the chip's peak HBM bandwidth, counting the bytes the op must read and
// write (as the published v6e copy measurement does: 32 MiB copied in 0.04936 ms = 83% of
// 1638 GB/s, AI-Hypercomputer/tpu-recipes), then per chip the spread of the large (>= 32 MiB)
// rows against that 83% and the 1-D / 2-D time ratio. docs/membound.md is this program's output.
// Two-TensorCore chips (v4, v5p, v7) stream on both cores, each with half the HBM bandwidth.
//
// Usage: bench-membound [chip ...]   (default: every preset; sizes 1, 32 and 256 MiB for 1-D and
// 2-D wide, 32 MiB for the other shapes)
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "isa/disassembler.h"
#include "kernels/compose/reduce_dims.h"
#include "kernels/graph/plan.h"
#include "sim/sim_device.h"
#include "torch_bridge/plan_runner/plan_runner.h"

using namespace vtpu;
using kernels::DType;
using kernels::ExprOp;

namespace {

struct Shape {
  std::string name;
  std::vector<int64_t> dims;  // the tensor the op reads (a view of a twice-taller one when strided)
  bool strided = false;
};

// Shapes of `elements` bf16 elements.
std::vector<Shape> shapes_of(int64_t elements, bool all) {
  std::vector<Shape> s = {{"1-D", {elements}}, {"2-D wide", {elements / 4096, 4096}}};  // the ratio's pair first
  if (!all) return s;
  s.push_back({"2-D narrow", {elements / 64, 64}});
  s.push_back({"3-D", {16, elements / 16 / 1000, 1000}});
  s.push_back({"strided", {elements / 4096, 4096}, true});
  return s;
}

struct Op {
  std::string name;
  int outputs_bytes_per_element;  // bytes written per input element (row sum: ~0)
  std::function<int(kernels::Graph&, int x, int y)> build;
  bool second_input = false;
};

const std::vector<Op>& ops() {
  static const std::vector<Op> all = {
      {"clone", 2, [](kernels::Graph& g, int x, int) { return g.cast(x, DType::BF16, "clone"); }},
      {"x + 1", 2, [](kernels::Graph& g, int x, int) { return g.binary_scalar(ExprOp::Add, x, 1.0); }},
      {"x * y", 2, [](kernels::Graph& g, int x, int y) { return g.binary(ExprOp::Mul, x, y); }, true},
      {"to f32", 4, [](kernels::Graph& g, int x, int) { return g.cast(x, DType::F32); }},
      {"sum(-1)", 0,
       [](kernels::Graph& g, int x, int) {
         return kernels::reduce_dims(g, x, {int64_t(g.node(x).type.shape.size()) - 1}, kernels::RowOp::Sum);
       }},
  };
  return all;
}

struct Result {
  double seconds = 0, fraction = 0, host_s = 0;
  size_t launches = 0;
};

Result run(const std::string& chip_name, const Shape& shape, const Op& op) {
  sim::SimDevice device(sim::load_chip(chip_name));
  kernels::Graph g;
  int64_t numel = 1;
  for (int64_t d : shape.dims) numel *= d;
  int x;
  if (shape.strided) {  // rows 0, 2, 4, ... of a [2 * rows, cols] tensor
    const int64_t rows = shape.dims[0], cols = shape.dims[1];
    const int base = g.input({{2 * rows, cols}, DType::BF16}, "base");
    x = g.strided_copy(base, {rows, cols}, {2 * cols, 1}, 0);
  } else {
    x = g.input({shape.dims, DType::BF16}, "x");
  }
  const int y = op.second_input ? g.input({shape.dims, DType::BF16}, "y") : -1;
  g.mark_output(op.build(g, x, y));
  kernels::ProgramCache cache;
  const auto plan = kernels::make_plan(g, kernels::FusionStrategy::Greedy, device.chip(), cache);
  if (std::getenv("VTPU_MEMBOUND_ASM")) {  // the programs themselves, to read a slow row's loop
    for (const auto& launch : plan.launches) fmt::print("{}\n", isa::disassemble(*launch.program));
  }
  std::map<int, sim::HbmAddress> bound;
  for (const auto& values : {plan.inputs, plan.outputs}) {
    for (int v : values) {
      if (plan.value_bytes.count(v)) bound[v] = device.allocate(plan.value_bytes.at(v));  // zeros: timing only
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  bridge::PlanExecution exec(device, plan, bound);
  const auto r = exec.run();
  Result out;
  out.host_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out.seconds = r.seconds;
  out.launches = plan.launches.size();
  // The bytes the op itself must move: its inputs read once, its output written once.
  const double bytes = double(numel) * (2 * (op.second_input ? 2 : 1) + op.outputs_bytes_per_element);
  out.fraction = bytes / r.seconds / device.chip().hbm_bandwidth_bytes_per_s;
  if (std::getenv("VTPU_MEMBOUND_UNITS")) {  // what to look at when a row is slow: each unit's busy fraction
    for (const auto& [unit, busy] : r.busy_cycles_per_unit) fmt::print("  {} {:.3f}\n", unit, double(busy) / r.cycles);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  constexpr double kPublishedCopy = 0.83;  // v6e, 32 MiB HBM-to-HBM copy, read + write counted
  std::vector<std::string> chips = {"v4", "v5e", "v5p", "v6e", "v7"};
  if (argc > 1) chips.assign(argv + 1, argv + argc);
  fmt::print("| chip | op | shape | MiB | kernels | simulated us | % of peak HBM bandwidth | host s |\n");
  fmt::print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |\n");
  std::vector<std::string> summary;
  for (const auto& chip : chips) {
    double lo = 1e9, hi = 0, worst_1d_over_2d = 0;
    for (const int64_t mib : {1, 32, 256}) {
      const int64_t elements = mib * (1 << 20) / 2;
      std::map<std::string, double> one_d, two_d;  // op -> time at this size
      for (const auto& shape : shapes_of(elements, mib == 32)) {
        for (const auto& op : ops()) {
          const auto r = run(chip, shape, op);
          std::string dims;
          for (int64_t d : shape.dims) dims += (dims.empty() ? "" : "x") + std::to_string(d);
          fmt::print("| {} | {} | {} ({}) | {} | {} | {:.1f} | {:.1f} | {:.2f} |\n", chip, op.name, shape.name, dims, mib,
                     r.launches, r.seconds * 1e6, 100 * r.fraction, r.host_s);
          std::fflush(stdout);
          if (mib >= 32) {
            lo = std::min(lo, r.fraction);
            hi = std::max(hi, r.fraction);
          }
          if (shape.name == "1-D") one_d[op.name] = r.seconds;
          if (shape.name == "2-D wide") two_d[op.name] = r.seconds;
        }
      }
      for (const auto& [op, t] : one_d) worst_1d_over_2d = std::max(worst_1d_over_2d, t / two_d.at(op));
    }
    summary.push_back(fmt::format("| {} | {:.1f} - {:.1f} | {:+.1f}% - {:+.1f}% | {:.3f} |", chip, 100 * lo, 100 * hi,
                                  100 * (lo / kPublishedCopy - 1), 100 * (hi / kPublishedCopy - 1), worst_1d_over_2d));
  }
  fmt::print("\nRows of 32 MiB and more against the published v6e copy efficiency ({:.0f}% of peak), and the slowest 1-D\n"
             "time over the same op's 2-D wide time at the same size:\n\n",
             100 * kPublishedCopy);
  fmt::print("| chip | % of peak HBM bandwidth | vs {:.0f}% | 1-D / 2-D time, worst |\n| --- | ---: | ---: | ---: |\n", 100 * kPublishedCopy);
  for (const auto& line : summary) fmt::print("{}\n", line);
  return 0;
}
