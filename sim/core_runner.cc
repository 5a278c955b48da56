#include "sim/core_runner.h"

#include <fmt/format.h>

#include <algorithm>

#include "isa/disassembler.h"
#include "sim/sim_error.h"

namespace vtpu::sim {

CoreRunner::CoreRunner(const isa::Program& program, const PreparedProgram& prepared, const ArgWindow& window,
                       const std::vector<int32_t>& arg_values, const ChipConfig& chip, const SimOptions& options,
                       CorePlace place, double hbm_share, traces::TraceRecorder* trace, VmemPool* vmem_pool)
    : code_(prepared.code),
      options_(options),
      vmem_pool_(vmem_pool),
      peers_(place.peers),
      core_(chip.kernel_vmem_bytes(), chip.mxu_per_core, chip.mxu_dim, chip.mxu_acc_slots, options.check_uninitialized,
            vmem_pool ? vmem_pool->take() : nullptr),
      dmas_(chip.semaphores),
      semantics_(core_, window, arg_values, dmas_, chip, options, prepared.flow),
      timing_(chip, hbm_share, place.core_index, trace),
      last_poll_(std::chrono::steady_clock::now()) {
  core_.core_index = place.core_index;
  core_.core_count = place.cores;
  core_.chip_index = place.chip_index;
  core_.chip_count = place.chips;
  semantics_.set_peers(place.peers);
  timing_.set_peers(place.peers, place.chip_index);
  for (const auto& seg : program.data) {
    std::copy(seg.bytes.begin(), seg.bytes.end(), core_.vmem.get() + seg.vmem_address);
    core_.vmem_dirty.mark(seg.vmem_address, seg.vmem_address + seg.bytes.size());
    if (!core_.vmem_written.empty()) {
      for (size_t w = seg.vmem_address / 4; w < (seg.vmem_address + seg.bytes.size() + 3) / 4; ++w) core_.vmem_written[w] = 1;
    }
  }
}

CoreRunner::Step CoreRunner::step() {
  if (halted_ || pc_ >= code_.size()) {
    halted_ = true;
    return Step::Halted;
  }
  if (options_.poll && (run_.instructions & 0x3FFF) == 0) {  // the clock read is cheap only every 16K steps
    if (const auto now = std::chrono::steady_clock::now(); now - last_poll_ > std::chrono::milliseconds(5)) {
      last_poll_ = now;
      options_.poll();
    }
  }
  if (run_.instructions >= options_.max_instructions) {
    throw SimError(SimErrorKind::StepLimit,
                   fmt::format("core {}: instruction budget of {} exhausted at instruction {} `{}` (runaway loop?)",
                               core_.core_index, options_.max_instructions, pc_, isa::format_instruction(code_[pc_])));
  }
  const isa::Instruction& ins = code_[pc_];
  if (ins.opcode == isa::Opcode::Semwait && dmas_.available(ins.operands[0]) < ins.operands[1]) return Step::Blocked;
  StepOutcome out = semantics_.step(ins, pc_);
  ++run_.instructions;
  run_.macs += out.macs;
  uint64_t wait_ready = 0;
  if (ins.opcode == isa::Opcode::Semwait) wait_ready = dmas_.wait(ins.operands[0], ins.operands[1]);
  const Scheduled s = timing_.schedule(ins, out, wait_ready);
  if (ins.opcode == isa::Opcode::Semsig) dmas_.signal(ins.operands[0], ins.operands[1], s.start);
  if (out.is_dma) {
    out.dma.done_cycle = s.ready;
    dmas_.add(out.dma);
    if (out.remote_chip >= 0) {
      out.remote_inbound.start_cycle = s.start;
      out.remote_inbound.done_cycle = s.ready;
      peers_->deliver(out.remote_chip, out.remote_inbound);
    }
  }
  if (out.halt) {
    halted_ = true;
    return Step::Halted;
  }
  pc_ = out.next_pc;
  return Step::Ran;
}

void CoreRunner::run_to_end() {
  for (;;) {
    const Step s = step();
    if (s == Step::Halted) return;
    if (s == Step::Blocked) fail_deadlocked();
  }
}

void CoreRunner::fail_deadlocked() const {
  const isa::Instruction& ins = code_[pc_];
  const int available = dmas_.available(ins.operands[0]);
  const std::string where = core_.chip_count > 1 ? fmt::format("chip {} core {}", core_.chip_index, core_.core_index)
                                                 : fmt::format("core {}", core_.core_index);
  throw SimError(SimErrorKind::Deadlock,
                 fmt::format("{} instruction {} `{}`{} waits for {} signal(s) on sem{}, but only {} can ever "
                             "arrive (no more DMAs or signals target it): deadlock",
                             where, pc_, isa::format_instruction(ins), mark_note(core_), ins.operands[1], ins.operands[0],
                             available));
}

CoreRun CoreRunner::finish() {
  run_.cycles = std::max(timing_.finish_cycle(), dmas_.last_completion_cycle());
  timing_.close_mark(run_.cycles);
  run_.hbm_read = timing_.hbm_read_bytes();
  run_.hbm_write = timing_.hbm_write_bytes();
  run_.held = timing_.local_dma_bytes();
  run_.ici = timing_.ici_bytes();
  timing_.add_unit_usage(run_.units);
  if (vmem_pool_) vmem_pool_->give_back(std::move(core_.vmem), core_.vmem_dirty);  // a failed launch frees its VMEM instead
  return std::move(run_);
}

}  // namespace vtpu::sim
