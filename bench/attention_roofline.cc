// The fused attention kernel (kernels/attention) on every preset: simulated time against the
// closed-form bound of the whole chip (the two products at the peak of all its TensorCores,
// which take shares of the heads, or q, k, v and out through HBM once) and the fraction of peak
// FLOP/s, as a Markdown table (docs/attention_roofline.md is this output). No run may be below
// its bound.
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <vector>

#include "kernels/attention/attention.h"
#include "kernels/attention/attention_backward.h"
#include "kernels/roofline.h"
#include "sim/sim_device.h"

using namespace vtpu;

namespace {

struct Shape {
  int64_t heads, seq, dim;
  bool causal;
};

// Self-attention over `seq` tokens, scale 1 / sqrt(head dim): bf16, or f32 at `passes`.
kernels::AttentionSpec spec_of(const Shape& s, kernels::DType dtype = kernels::DType::BF16, int passes = 1) {
  kernels::AttentionSpec spec;
  spec.batch = s.heads;
  spec.q_len = spec.kv_len = s.seq;
  spec.head_dim = s.dim;
  spec.dtype = dtype;
  spec.passes = passes;
  spec.causal = s.causal;
  spec.scale = 1.0 / std::sqrt(double(s.dim));
  return spec;
}

struct Run {
  double simulated_s, host_s;
};

// Launches `program` on zeroed buffers of the given sizes (timing only); simulated and host time.
Run run(sim::SimDevice& device, const isa::Program& program, std::initializer_list<uint64_t> buffer_bytes) {
  std::vector<sim::KernelArg> args;
  for (uint64_t bytes : buffer_bytes) args.push_back(sim::KernelArg::buffer(device.allocate(bytes), bytes));
  const auto t0 = std::chrono::steady_clock::now();
  const auto result = device.wait(device.launch(program, args));
  return {result.summary.seconds(), std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()};
}

}  // namespace

int main() {
  const Shape shapes[] = {{8, 512, 64, false}, {8, 512, 128, false}, {8, 2048, 128, false}, {8, 2048, 128, true},
                          {16, 1024, 64, true}};
  fmt::print("| chip | heads x seq x head dim | causal | simulated us | bound us | bound by | simulated / bound | "
             "% of peak FLOP/s | host s |\n");
  fmt::print("| --- | --- | --- | ---: | ---: | --- | ---: | ---: | ---: |\n");
  bool ok = true;
  for (const char* chip_name : {"v5e", "v6e", "v4", "v5p", "v7"}) {
    for (const auto& s : shapes) {
      sim::SimDevice device(sim::load_chip(chip_name));
      const auto& chip = device.chip();
      const kernels::AttentionSpec spec = spec_of(s);
      const uint64_t io = uint64_t(s.heads * s.seq * s.dim * 2), lse = uint64_t(s.heads * s.seq * 4);
      const auto program = kernels::make_attention(spec, chip);
      const int cores = program.multicore ? chip.tensor_cores : 1;
      const auto [simulated, host_s] = run(device, program, {io, io, io, io + lse});
      const auto bound = kernels::attention_bound(chip, spec, cores);
      const double ratio = simulated / bound.seconds();
      ok &= ratio >= 1.0;
      fmt::print("| {} | {}x{}x{} | {} | {:.2f} | {:.2f} | {} | {:.2f} | {:.1f} | {:.2f} |\n", chip_name, s.heads, s.seq,
                 s.dim, s.causal ? "yes" : "no", simulated * 1e6, bound.seconds() * 1e6,
                 bound.compute_s >= bound.memory_s ? "compute" : "memory", ratio,
                 100.0 * kernels::attention_flops(spec) / simulated / chip.model_peak_flops(cores), host_s);
    }
  }
  // the fused backward (one pass; on v6e two 128-wide blocks share each 256-wide MXU)
  // and f32 at precision 'highest' (six passes: every product as six bf16 products) for one shape
  fmt::print("\nBackward (kernels/attention_backward):\n\n");
  fmt::print("| chip | heads x seq x head dim | causal | inputs | simulated us | bound us | bound by | simulated / bound | host s |\n");
  fmt::print("| --- | --- | --- | --- | ---: | ---: | --- | ---: | ---: |\n");
  struct Case {
    Shape shape;
    kernels::DType dtype;
    int passes;
  };
  std::vector<Case> cases;
  for (const auto& s : shapes) cases.push_back({s, kernels::DType::BF16, 1});
  for (bool causal : {false, true}) cases.push_back({{8, 512, 128, causal}, kernels::DType::F32, 6});
  for (const char* chip_name : {"v5e", "v6e", "v4", "v5p", "v7"}) {
    for (const auto& [s, dtype, passes] : cases) {
      sim::SimDevice device(sim::load_chip(chip_name));
      const auto& chip = device.chip();
      const kernels::AttentionSpec spec = spec_of(s, dtype, passes);
      const uint64_t io = uint64_t(s.heads * s.seq * s.dim * kernels::dtype_bytes(dtype)), lse = uint64_t(s.heads * s.seq * 4);
      const auto program = kernels::make_attention_backward(spec, chip);
      const int cores = program.multicore ? chip.tensor_cores : 1;
      const auto [simulated, host_s] = run(device, program, {io, io, io, io, io, lse, 3 * io});
      const auto bound = kernels::attention_backward_bound(chip, spec, cores);
      const double ratio = simulated / bound.seconds();
      ok &= ratio >= 1.0;
      fmt::print("| {} | {}x{}x{} | {} | {} | {:.2f} | {:.2f} | {} | {:.2f} | {:.2f} |\n", chip_name, s.heads, s.seq, s.dim,
                 s.causal ? "yes" : "no", passes == 1 ? "bf16" : fmt::format("f32, {} passes", passes), simulated * 1e6,
                 bound.seconds() * 1e6,
                 bound.compute_s >= bound.memory_s ? "compute" : "memory", ratio, host_s);
    }
  }
  if (!ok) fmt::print("\nERROR: a simulated time is below its roofline bound\n");
  return ok ? 0 : 1;
}
