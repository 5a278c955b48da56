// The MXU timing model alone, for the SCALE-Sim cross-check (bench/scalesim_crosscheck.py): one
// weight-stationary 128x128 MXU (v5e's, with mxu_per_core = 1), operands already in VMEM and
// vregs, no DMA. For each 512-row chunk of M, each N tile and each K tile: load the 128x128
// weights (double-buffered: the next load overlaps this tile's matmuls), push the chunk's rows 8 at
// a time into one accumulator slot per 8 rows, and pop the slots after the last K tile.
// Usage: bench-mxu-gemm-cycles M N K [M N K ...]   prints "M N K cycles" per GEMM.
#include <fmt/format.h>

#include <cstdlib>

#include "kernels/codegen/asm_writer.h"
#include "sim/sim_device.h"

using namespace vtpu;

namespace {

isa::Program weight_stationary_gemm(int64_t m, int64_t n, int64_t k, const sim::ChipConfig& chip) {
  const int64_t d = chip.mxu_dim, slots = chip.mxu_acc_slots;
  const int64_t groups = (m + 7) / 8, n_tiles = (n + d - 1) / d, k_tiles = (k + d - 1) / d;
  kernels::AsmWriter w("ws_gemm");
  auto& s = w.sregs();
  const int weights = s.take(), nt = s.take(), kt = s.take(), n_end = s.take(), k_end = s.take();
  w.line("sli s{}, 0", weights);  // every tile's weights from VMEM 0: the values do not change the timing
  for (int64_t first = 0; first < groups; first += slots) {
    const int64_t chunk = std::min(slots, groups - first);
    const std::string n_loop = w.new_label("n"), k_loop = w.new_label("k");
    w.line("sli s{}, 0", nt);
    w.load_immediate(n_end, n_tiles);
    w.place(n_loop);
    w.line("sli s{}, 0", kt);
    w.load_immediate(k_end, k_tiles);
    w.place(k_loop);
    w.line("mxu.lw mxu0, s{}, {}", weights, d * 2);
    for (int64_t g = 0; g < chunk; ++g) w.line("mxu.mm mxu0, v0, {}", g);
    w.line("saddi s{}, s{}, 1", kt, kt);
    w.line("blt s{}, s{}, {}", kt, k_end, k_loop);
    for (int64_t g = 0; g < chunk; ++g) w.line("mxu.pop v{}, mxu0, {}", 8 + g % 8, g);
    w.line("saddi s{}, s{}, 1", nt, nt);
    w.line("blt s{}, s{}, {}", nt, n_end, n_loop);
  }
  return w.assemble();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4 || (argc - 1) % 3 != 0) {
    fmt::print(stderr, "usage: {} M N K [M N K ...]\n", argv[0]);
    return 2;
  }
  sim::ChipConfig chip = sim::load_chip("v5e");
  chip.mxu_per_core = 1;  // SCALE-Sim models one array
  for (int i = 1; i + 2 < argc; i += 3) {
    const int64_t m = std::atoll(argv[i]), n = std::atoll(argv[i + 1]), k = std::atoll(argv[i + 2]);
    sim::SimDevice device(chip);
    const auto result = device.wait(device.launch(weight_stationary_gemm(m, n, k, chip), {}));
    fmt::print("{} {} {} {}\n", m, n, k, result.summary.cycles);
  }
  return 0;
}
