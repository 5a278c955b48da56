#include "sim/executor.h"

#include <fmt/format.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>

#include "isa/disassembler.h"
#include "sim/core_activity.h"
#include "sim/core_state.h"
#include "sim/dma_tracker.h"
#include "sim/semantics.h"
#include "sim/sim_error.h"
#include "sim/timing_model.h"

namespace vtpu::sim {
namespace {

struct CoreRun {
  uint64_t cycles = 0;
  uint64_t instructions = 0;
  double macs = 0;
  uint64_t hbm_read = 0, hbm_write = 0, held = 0;
  std::vector<traces::UnitUsage> units;
};

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

CoreRun run_core(const isa::Program& program, const std::vector<isa::Instruction>& code, const ArgWindow& window,
                 const std::vector<int32_t>& arg_values, const ChipConfig& chip, const SimOptions& options,
                 int core_index, int cores, double hbm_share, traces::TraceRecorder* trace, VmemPool* vmem_pool) {
  CoreState core(chip.kernel_vmem_bytes(), chip.mxu_per_core, chip.mxu_dim, chip.mxu_acc_slots, options.check_uninitialized,
                 vmem_pool ? vmem_pool->take() : nullptr);
  core.core_index = core_index;
  core.core_count = cores;
  for (const auto& seg : program.data) {
    std::copy(seg.bytes.begin(), seg.bytes.end(), core.vmem.get() + seg.vmem_address);
    core.vmem_dirty_end = std::max<uint64_t>(core.vmem_dirty_end, seg.vmem_address + seg.bytes.size());
    if (!core.vmem_written.empty()) {
      for (size_t w = seg.vmem_address / 4; w < (seg.vmem_address + seg.bytes.size() + 3) / 4; ++w) core.vmem_written[w] = 1;
    }
  }
  DmaTracker dmas(chip.semaphores);
  Semantics semantics(core, window, arg_values, dmas, chip, options);
  TimingModel timing(chip, hbm_share, core_index, trace);
  CoreRun run;
  size_t pc = 0;
  auto last_poll = std::chrono::steady_clock::now();
  while (pc < code.size()) {
    if (options.poll && (run.instructions & 0x3FFF) == 0) {  // the clock read is cheap only every 16K steps
      if (const auto now = std::chrono::steady_clock::now(); now - last_poll > std::chrono::milliseconds(5)) {
        last_poll = now;
        options.poll();
      }
    }
    if (run.instructions >= options.max_instructions) {
      throw SimError(SimErrorKind::StepLimit,
                     fmt::format("core {}: instruction budget of {} exhausted at instruction {} `{}` (runaway loop?)",
                                 core_index, options.max_instructions, pc, isa::format_instruction(code[pc])));
    }
    const isa::Instruction& ins = code[pc];
    StepOutcome out = semantics.step(ins, pc);
    ++run.instructions;
    run.macs += out.macs;
    uint64_t wait_ready = 0;
    if (ins.opcode == isa::Opcode::Semwait) {
      const WaitOutcome w = dmas.wait(ins.operands[0], ins.operands[1]);
      if (!w.satisfied) {
        throw SimError(SimErrorKind::Deadlock,
                       fmt::format("core {} instruction {} `{}` waits for {} signal(s) on sem{}, but only {} can ever "
                                   "arrive (no more DMAs or signals target it): deadlock",
                                   core_index, pc, isa::format_instruction(ins), ins.operands[1], ins.operands[0],
                                   w.available));
      }
      wait_ready = w.ready_cycle;
    }
    const Scheduled s = timing.schedule(ins, out, wait_ready);
    if (ins.opcode == isa::Opcode::Semsig) dmas.signal(ins.operands[0], ins.operands[1], s.start);
    if (out.is_dma) {
      out.dma.done_cycle = s.ready;
      dmas.add(out.dma);
    }
    if (out.halt) break;
    pc = out.next_pc;
  }
  run.cycles = std::max(timing.finish_cycle(), dmas.last_completion_cycle());
  run.hbm_read = timing.hbm_read_bytes();
  run.hbm_write = timing.hbm_write_bytes();
  run.held = timing.local_dma_bytes();
  timing.add_unit_usage(run.units);
  if (vmem_pool) vmem_pool->give_back(std::move(core.vmem), core.vmem_dirty_end);  // a failed launch frees its VMEM instead
  return run;
}

}  // namespace

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
  check_arguments(program, args);
  ArgWindow window;
  std::vector<int32_t> arg_values;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].kind == KernelArg::Kind::Buffer) {
      const bool on_chip = held && held->contains(args[i].address);
      Hbm& memory = on_chip ? *held : hbm;
      memory.view(args[i].address, args[i].bytes, fmt::format("argument {} '{}'", i, program.arguments[i].name));
      arg_values.push_back(static_cast<int32_t>(
          window.map(program.arguments[i].name, memory, args[i].address, args[i].bytes, on_chip)));
    } else {
      arg_values.push_back(args[i].scalar);
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
      runs[c] = run_core(program, code, window, arg_values, chip, options, c, cores, hbm_share, trace, vmem_pool);
    }
  } else {
    tbb::parallel_for(0, cores, [&](int c) {
      runs[c] = run_core(program, code, window, arg_values, chip, options, c, cores, hbm_share, nullptr, vmem_pool);
    });
  }
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
    s.units.insert(s.units.end(), r.units.begin(), r.units.end());
  }
  result.cycles = s.cycles;
  if (trace) trace->flush();
  return result;
}

}  // namespace vtpu::sim
