// Simulator throughput: host seconds to simulate the 1024^3 bf16 matmul (examples/matmul_bf16.s)
// on v5e against host seconds of Eigen's own f32 GEMM of the same size, measured side by side in
// this run (best of N each, so the ratio is not a comparison across machines). Target: <= 3x.
#include <fmt/format.h>

#include <Eigen/Core>
#include <chrono>
#include <fstream>
#include <sstream>

#include "isa/assembler.h"
#include "sim/sim_device.h"

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::atoi(argv[1]) : 5;
  constexpr int n = 1024;
  std::ifstream in(std::string(VTPU_SOURCE_DIR) + "/examples/matmul_bf16.s");
  std::stringstream text;
  text << in.rdbuf();
  const auto program = vtpu::isa::assemble(text.str(), "matmul_bf16");
  vtpu::sim::SimDevice device(vtpu::sim::load_chip("v5e"));
  const auto a = device.allocate(n * n * 2), b = device.allocate(n * n * 2), c = device.allocate(n * n * 4);
  std::vector<uint8_t> ones(n * n * 2);
  for (size_t i = 0; i < ones.size(); i += 2) ones[i + 1] = 0x3f, ones[i] = 0x80;  // bf16 1.0
  device.copy_to_device(a, ones);
  device.copy_to_device(b, ones);
  const vtpu::sim::KernelArg args[] = {vtpu::sim::KernelArg::buffer(a, n * n * 2),
                                       vtpu::sim::KernelArg::buffer(b, n * n * 2),
                                       vtpu::sim::KernelArg::buffer(c, n * n * 4)};
  Eigen::MatrixXf x = Eigen::MatrixXf::Random(n, n), y = Eigen::MatrixXf::Random(n, n), z(n, n);
  using clock = std::chrono::steady_clock;
  double best_sim = 1e9, best_eigen = 1e9;
  uint64_t cycles = 0;
  for (int r = 0; r < repeats; ++r) {
    auto t0 = clock::now();
    cycles = device.wait(device.launch(program, args)).cycles;
    auto t1 = clock::now();
    z.noalias() = x * y;
    auto t2 = clock::now();
    best_sim = std::min(best_sim, std::chrono::duration<double>(t1 - t0).count());
    best_eigen = std::min(best_eigen, std::chrono::duration<double>(t2 - t1).count());
  }
  const auto& chip = device.chip();
  const double bound_s = std::max(2.0 * n * n * n / chip.model_peak_flops(1),
                                  double(n) * n * (2 + 2 + 4) / chip.sustained_hbm_bytes_per_s());
  fmt::print("matmul 1024^3 bf16 on v5e: {} simulated cycles = {:.3f} us; roofline bound {:.3f} us; "
             "simulated / bound = {:.3f} (target <= 1.25)\n",
             cycles, chip.cycles_to_seconds(double(cycles)) * 1e6, bound_s * 1e6,
             chip.cycles_to_seconds(double(cycles)) / bound_s);
  fmt::print("host seconds: simulator {:.4f}, Eigen f32 GEMM {:.4f} (best of {}, Eigen threads {})\n", best_sim,
             best_eigen, repeats, Eigen::nbThreads());
  fmt::print("simulator / Eigen = {:.2f}x (target <= 3x)\n", best_sim / best_eigen);
  return z(0, 0) == 12345.f;  // keep the GEMM observable
}
