// The functional meaning of every instruction: one case each in semantics.cc, kept apart from
// timing so it reads as the living spec of the ISA. step() mutates CoreState (and HBM for DMAs)
// and reports what timing and synchronisation need to know.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "isa/instruction.h"
#include "sim/arg_window.h"
#include "sim/chip_config.h"
#include "sim/core_state.h"
#include "sim/data_dependence.h"
#include "sim/dma_tracker.h"
#include "sim/launch.h"
#include "sim/sim_error.h"
#include "sim/slice_peers.h"

namespace vtpu::sim {

struct StepOutcome {
  size_t next_pc = 0;
  bool halt = false;
  bool branch_taken = false;
  Region vmem_read, vmem_write;    // what was touched, for timing hazards
  bool is_dma = false;
  DmaRecord dma;                   // done_cycle filled in by the timing model
  uint64_t dma_bytes = 0;
  bool dma_on_chip = false;        // the far side is VMEM held across launches, not HBM
  int remote_chip = -1;            // dma.remote: the destination chip
  DmaRecord remote_inbound;        // dma.remote: the destination's side (done_cycle filled in later)
  double macs = 0;                 // MXU multiply-accumulates done
  std::optional<int32_t> mark;     // `mark`: its operand, for the trace
};

class Semantics {
 public:
  Semantics(CoreState& core, const ArgWindow& window, const std::vector<int32_t>& arg_values,
            const DmaTracker& dmas, const ChipConfig& chip, const SimOptions& options, const DataFlow& flow)
      : core_(core), window_(window), args_(arg_values), dmas_(dmas), chip_(chip), options_(options), flow_(flow) {
    args_.resize(kArgumentSlots, 0);  // the launch's arguments, then scratch slots for sargw
  }

  StepOutcome step(const isa::Instruction& ins, size_t pc);
  // The other chips of a slice launch (nullptr: a single-chip launch).
  void set_peers(SlicePeers* peers) { peers_ = peers; }

 private:
  [[noreturn]] void fail(SimErrorKind kind, const std::string& message, int trap_code = -1) const;
  void check_vmem(uint64_t lo, uint64_t hi, bool write) const;
  void check_vmem_region(const Region& region, bool write) const;
  void mark_or_check_init(uint64_t lo, uint64_t hi, bool write) const;
  void vector_load(const isa::Instruction& ins, StepOutcome& out);
  void vector_store(const isa::Instruction& ins, StepOutcome& out);
  void mxu_load_weights(const isa::Instruction& ins, StepOutcome& out);
  void mxu_matmul(const isa::Instruction& ins, StepOutcome& out);
  void dma(const isa::Instruction& ins, StepOutcome& out);
  void remote_dma(const isa::Instruction& ins, StepOutcome& out);

  CoreState& core_;
  const ArgWindow& window_;
  // The core's scalar memory of arguments: its own copy, since sargw rewrites it (a .multicore
  // kernel narrows its arguments to its TensorCore's share of the work).
  static constexpr size_t kArgumentSlots = 256;
  std::vector<int32_t> args_;
  const DmaTracker& dmas_;
  const ChipConfig& chip_;
  const SimOptions& options_;
  const DataFlow& flow_;  // which vector instructions a timing-only run still computes
  SlicePeers* peers_ = nullptr;
  const isa::Instruction* current_ = nullptr;
  size_t pc_ = 0;
};

}  // namespace vtpu::sim
