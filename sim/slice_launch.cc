#include "sim/slice_launch.h"

#include <fmt/format.h>

#include <memory>

#include "sim/core_runner.h"
#include "sim/executor.h"
#include "sim/prepared_program.h"
#include "sim/sim_error.h"

namespace vtpu::sim {
namespace {

class Peers : public SlicePeers {
 public:
  Peers(IciLinks& links, std::vector<MappedArguments>& mapped) : links_(links), mapped_(mapped) {}
  void attach(std::vector<std::unique_ptr<CoreRunner>>* runners) { runners_ = runners; }

  int chip_count() const override { return static_cast<int>(mapped_.size()); }
  std::span<uint8_t> view(int chip, uint64_t address, uint64_t bytes, const std::string& what) override {
    return mapped_[chip].window.view(address, bytes, what);
  }
  uint64_t transfer(int src, int dst, uint64_t bytes, uint64_t ready_cycle) override {
    return links_.transfer(src, dst, bytes, ready_cycle);
  }
  void deliver(int dst, const DmaRecord& inbound) override {
    DmaTracker& dmas = (*runners_)[dst]->dmas();
    if (inbound.hbm.rows > 0) {
      if (const DmaRecord* conflict = dmas.remote_write_conflict(inbound.hbm, inbound.start_cycle)) {
        throw SimError(SimErrorKind::Race,
                       fmt::format("dma.remote into chip {}'s HBM [0x{:x}, 0x{:x}) races that chip's DMA issued by "
                                   "instruction {}, still in flight",
                                   dst, inbound.hbm.lo(), inbound.hbm.hi(), conflict->pc));
      }
    }
    dmas.add(inbound);
  }

 private:
  IciLinks& links_;
  std::vector<MappedArguments>& mapped_;
  std::vector<std::unique_ptr<CoreRunner>>* runners_ = nullptr;
};

}  // namespace

SliceLaunchResult execute_slice(const isa::Program& program, const ChipConfig& chip, const Slice& slice,
                                std::span<const std::vector<KernelArg>> args, std::span<Hbm* const> hbms,
                                const SimOptions& options, traces::TraceRecorder* trace) {
  const int chips = slice.size();
  if (static_cast<int>(args.size()) != chips || static_cast<int>(hbms.size()) != chips) {
    throw SimError(SimErrorKind::BadLaunch, fmt::format("slice launch of '{}' on {} chips got arguments for {} and {} HBMs",
                                                        program.name, chips, args.size(), hbms.size()));
  }
  for (int c = 1; c < chips; ++c) {
    for (size_t i = 0; i < args[c].size() && i < args[0].size(); ++i) {
      if (args[c][i].kind == KernelArg::Kind::Buffer && args[c][i].bytes != args[0][i].bytes) {
        throw SimError(SimErrorKind::BadLaunch,
                       fmt::format("slice launch of '{}': argument {} is {} bytes on chip {} but {} on chip 0 (every "
                                   "chip's buffers must match so that one kernel address names the same buffer)",
                                   program.name, i, args[c][i].bytes, c, args[0][i].bytes));
      }
    }
  }
  const PreparedProgram prepared = prepare(program, chip);
  std::vector<MappedArguments> mapped;
  for (int c = 0; c < chips; ++c) mapped.push_back(map_arguments(program, args[c], *hbms[c]));
  IciLinks links(chip, slice, trace);
  Peers peers(links, mapped);
  std::vector<std::unique_ptr<CoreRunner>> runners;
  for (int c = 0; c < chips; ++c) {
    if (trace) trace->set_process_prefix(fmt::format("tpu:{} ", c));
    const CorePlace place{.core_index = 0, .cores = 1, .chip_index = c, .chips = chips, .peers = &peers};
    runners.push_back(std::make_unique<CoreRunner>(program, prepared, mapped[c].window, mapped[c].values, chip,
                                                   options, place, 1.0, trace, nullptr));
  }
  if (trace) trace->set_process_prefix("");
  peers.attach(&runners);

  // Step the running core that issues earliest; blocked cores wait until another chip has run.
  std::vector<bool> blocked(chips, false);
  for (;;) {
    int next = -1;
    for (int c = 0; c < chips; ++c) {
      if (runners[c]->halted() || blocked[c]) continue;
      if (next < 0 || runners[c]->issue_cycle() < runners[next]->issue_cycle()) next = c;
    }
    if (next < 0) {
      for (int c = 0; c < chips; ++c) {
        if (!runners[c]->halted()) runners[c]->fail_deadlocked();
      }
      break;
    }
    const CoreRunner::Step step = runners[next]->step();
    if (step == CoreRunner::Step::Blocked) {
      blocked[next] = true;
    } else if (step == CoreRunner::Step::Ran) {
      std::fill(blocked.begin(), blocked.end(), false);  // it may have sent what another waits for
    }
  }
  SliceLaunchResult result;
  for (auto& runner : runners) {
    result.chips.push_back(summarize(chip, 1, {runner->finish()}));
    result.cycles = std::max(result.cycles, result.chips.back().cycles);
  }
  result.links = links.usage();
  if (trace) trace->flush();
  return result;
}

}  // namespace vtpu::sim
