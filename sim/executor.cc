#include "sim/executor.h"

#include <fmt/format.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <memory>
#include <mutex>

#include "sim/core_activity.h"
#include "sim/core_runner.h"
#include "sim/sim_error.h"

namespace vtpu::sim {
namespace {

void check_arguments(const isa::Program& program, std::span<const KernelArg> args) {
  if (args.size() != program.arguments.size()) {
    throw SimError(SimErrorKind::BadLaunch, fmt::format("program '{}' takes {} arguments, launch passed {}",
                                                        program.name, program.arguments.size(), args.size()));
  }
  for (size_t i = 0; i < args.size(); ++i) {
    const bool want_buffer = program.arguments[i].kind == isa::ArgumentKind::Buffer;
    const bool is_buffer = args[i].kind == KernelArg::Kind::Buffer;
    if (want_buffer != is_buffer) {
      throw SimError(SimErrorKind::BadLaunch, fmt::format("argument {} '{}' of '{}' expects a {}, launch passed a {}", i,
                                                          program.arguments[i].name, program.name,
                                                          want_buffer ? "buffer" : "scalar",
                                                          is_buffer ? "buffer" : "scalar"));
    }
  }
}

CoreRun run_core(const isa::Program& program, const PreparedProgram& prepared, const ArgWindow& window,
                 const std::vector<int32_t>& arg_values, const ChipConfig& chip, const SimOptions& options,
                 int core_index, int cores, double hbm_share, traces::TraceRecorder* trace, VmemPool* vmem_pool) {
  CoreRunner runner(program, prepared, window, arg_values, chip, options, {.core_index = core_index, .cores = cores},
                    hbm_share, trace, vmem_pool);
  runner.run_to_end();
  return runner.finish();
}

}  // namespace

MappedArguments map_arguments(const isa::Program& program, std::span<const KernelArg> args, Hbm& hbm, Hbm* held) {
  check_arguments(program, args);
  MappedArguments mapped;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].kind == KernelArg::Kind::Buffer) {
      const bool on_chip = held && held->contains(args[i].address);
      Hbm& memory = on_chip ? *held : hbm;
      if (!memory.holds(args[i].address, args[i].bytes)) {  // view() throws, naming the argument
        memory.view(args[i].address, args[i].bytes, fmt::format("argument {} '{}'", i, program.arguments[i].name));
      }
      mapped.values.push_back(static_cast<int32_t>(
          mapped.window.map(program.arguments[i].name, memory, args[i].address, args[i].bytes, on_chip)));
    } else {
      mapped.values.push_back(args[i].scalar);
    }
  }
  return mapped;
}

LaunchResult summarize(const ChipConfig& chip, int cores, const std::vector<CoreRun>& runs) {
  LaunchResult result;
  auto& s = result.summary;
  s.chip = chip.name;
  s.clock_hz = chip.clock_hz;
  s.peak_flops = chip.model_peak_flops(cores);
  s.hbm_bandwidth_bytes_per_s = chip.hbm_bandwidth_bytes_per_s;
  for (const auto& r : runs) {
    s.cycles = std::max(s.cycles, r.cycles);
    s.instructions += r.instructions;
    s.flops += 2 * r.macs;
    s.hbm_read_bytes += r.hbm_read;
    s.hbm_write_bytes += r.hbm_write;
    s.held_vmem_bytes += r.held;
    s.ici_bytes += r.ici;
    s.units.insert(s.units.end(), r.units.begin(), r.units.end());
  }
  result.cycles = s.cycles;
  return result;
}

LaunchResult execute(const isa::Program& program, std::span<const KernelArg> args, const ChipConfig& chip, Hbm& hbm,
                     const SimOptions& options, traces::TraceRecorder* trace) {
  return execute(program, prepare(program, chip), args, chip, hbm, options, trace);
}

LaunchResult execute(const isa::Program& program, const PreparedProgram& prepared, std::span<const KernelArg> args,
                     const ChipConfig& chip, Hbm& hbm, const SimOptions& options, traces::TraceRecorder* trace,
                     VmemPool* vmem_pool, Hbm* held) {
  const int cores = options.cores > 0 ? options.cores : (program.multicore ? chip.tensor_cores : 1);
  if (cores < 1 || cores > chip.tensor_cores) {
    throw SimError(SimErrorKind::BadLaunch,
                   fmt::format("launch asks for {} TensorCores; {} has {}", cores, chip.name, chip.tensor_cores));
  }
  auto [window, arg_values] = map_arguments(program, args, hbm, held);
  // A traced launch runs in full, so that its trace has every instruction's slices.
  const bool memoise = options.timing_only && !prepared.flow.depends_on_data && !trace;
  TimingMemo::Key memo_key;
  if (memoise) {
    memo_key = TimingMemo::key(cores, args, held);
    if (auto remembered = prepared.memo.find(memo_key)) {
      remembered->memo_hit = true;
      return *remembered;
    }
  }
  const std::vector<isa::Instruction>& code = prepared.code;

  // The chip's HBM bandwidth is split evenly among the cores that move data, fixed for the launch
  // (a core that finishes early does not hand its share to the others).
  int movers = 0;
  for (int c = 0; c < cores; ++c) movers += cores == 1 || core_moves_data(code, arg_values, chip, options, c, cores);
  const double hbm_share = 1.0 / std::max(movers, 1);
  std::vector<CoreRun> runs(cores);
  if (trace || cores == 1) {
    for (int c = 0; c < cores; ++c) {
      runs[c] = run_core(program, prepared, window, arg_values, chip, options, c, cores, hbm_share, trace, vmem_pool);
    }
  } else {
    tbb::parallel_for(0, cores, [&](int c) {
      runs[c] = run_core(program, prepared, window, arg_values, chip, options, c, cores, hbm_share, nullptr, vmem_pool);
    });
  }
  LaunchResult result = summarize(chip, cores, runs);
  result.depends_on_data = prepared.flow.depends_on_data;
  if (trace) trace->flush();
  if (memoise) prepared.memo.remember(std::move(memo_key), result);
  return result;
}

}  // namespace vtpu::sim
