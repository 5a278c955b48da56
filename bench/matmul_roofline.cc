// Generated matmuls (kernels/matmul) on every preset, 512^3 to 4096^3 and two skinny shapes, in bf16: simulated
// time against the closed-form roofline bound of the whole chip (all its TensorCores: the matmul
// splits its rows or columns across them) and the achieved fraction of peak, as a Markdown table
// (docs/matmul_roofline.md is this program's output). Targets: never below the bound; within 15%
// of it for the large shapes. With arguments `chip m n k`, one shape only, followed by
// its per-unit summary (what to look at when a row misses its target).
#include <fmt/format.h>

#include <chrono>
#include <string>
#include <vector>

#include "kernels/generators/matmul.h"
#include "kernels/roofline.h"
#include "sim/sim_device.h"

using namespace vtpu;

int main(int argc, char** argv) {
  struct Shape {
    int64_t m, n, k;
  };
  // The last two are skinny products (a decode step's 8 rows; 256 rows), which two-core chips split
  // by columns.
  std::vector<Shape> shapes = {{512, 512, 512},    {1024, 1024, 1024}, {2048, 2048, 1024}, {2048, 2048, 2048},
                               {4096, 4096, 1024}, {4096, 4096, 4096}, {8, 4096, 4096},    {256, 4096, 4096}};
  std::vector<std::string> chips = {"v5e", "v6e", "v4", "v5p", "v7"};
  const bool one = argc == 5;
  if (one) {
    chips = {argv[1]};
    shapes = {{std::stoll(argv[2]), std::stoll(argv[3]), std::stoll(argv[4])}};
  }
  fmt::print("| chip | M x N x K | simulated us | bound us | bound by | simulated / bound | % of peak FLOP/s | host s |\n");
  fmt::print("| --- | --- | ---: | ---: | --- | ---: | ---: | ---: |\n");
  bool ok = true;
  for (const auto& chip_name : chips) {
    for (const auto& s : shapes) {
      sim::SimDevice device(sim::load_chip(chip_name));
      const auto& chip = device.chip();
      kernels::MatmulSpec spec;
      spec.m = s.m;
      spec.n = s.n;
      spec.k = s.k;
      isa::Program program;
      try {
        program = kernels::make_matmul(spec, chip);
      } catch (const kernels::KernelError& e) {  // a shape the generator does not serve on this chip
        fmt::print("| {} | {}x{}x{} | not generated: {} | | | | | |\n", chip_name, s.m, s.n, s.k, e.what());
        continue;
      }
      const uint64_t a_bytes = s.m * s.k * 2, b_bytes = s.k * s.n * 2, c_bytes = s.m * s.n * 4;
      const auto a = device.allocate(a_bytes), b = device.allocate(b_bytes), c = device.allocate(c_bytes);
      const sim::KernelArg args[] = {sim::KernelArg::buffer(a, a_bytes), sim::KernelArg::buffer(b, b_bytes),
                                     sim::KernelArg::buffer(c, c_bytes), sim::KernelArg::value(int32_t(spec.m)),
                                     sim::KernelArg::value(int32_t(spec.n)), sim::KernelArg::value(int32_t(spec.k))};
      const auto t0 = std::chrono::steady_clock::now();
      const auto result = device.wait(device.launch(program, args));
      const double host_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const int cores = program.multicore ? chip.tensor_cores : 1;
      const auto bound = kernels::matmul_bound(chip, 1, s.m, s.n, s.k, kernels::DType::BF16, kernels::DType::BF16,
                                               kernels::DType::F32, false, 1, cores);
      const double simulated = result.summary.seconds(), ratio = simulated / bound.seconds();
      ok &= ratio >= 1.0;
      fmt::print("| {} | {}x{}x{} | {:.2f} | {:.2f} | {} | {:.3f} | {:.1f} | {:.2f} |\n", chip_name, s.m, s.n, s.k,
                 simulated * 1e6, bound.seconds() * 1e6, bound.compute_s >= bound.memory_s ? "compute" : "memory", ratio,
                 100.0 * result.summary.achieved_flops() / chip.model_peak_flops(cores), host_s);
      if (one) fmt::print("\n{}", traces::render_text(result.summary));
    }
  }
  if (!ok) fmt::print("\nERROR: a simulated time is below its roofline bound\n");
  return ok ? 0 : 1;
}
