// A Program checked and decoded for one chip: what every launch of it needs before its first
// instruction, done once. The width check and the verifier refuse a program the chip cannot run
// (SimError BadLaunch); PreparedPrograms remembers recent programs by content, so launching the
// same kernel again (the bridge launches a few hundred programs thousands of times) skips both
// and the decoding.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "isa/instruction.h"
#include "isa/program.h"
#include "sim/chip_config.h"
#include "sim/data_dependence.h"
#include "sim/timing_memo.h"

namespace vtpu::sim {

struct PreparedProgram {
  std::vector<isa::Instruction> code;
  DataFlow flow;  // what depends on data (sim/data_dependence.h)
  // Timing-only results of its launches, when it does not depend on data. Mutable: remembering
  // a result does not change the program (SimDevice serialises its launches).
  mutable TimingMemo memo;
};

// Checks `program` against `chip` (its MXU width, the verifier's limits) and decodes it.
PreparedProgram prepare(const isa::Program& program, const ChipConfig& chip);

class PreparedPrograms {
 public:
  explicit PreparedPrograms(size_t capacity = 4096) : capacity_(capacity) {}
  // The prepared form of `program` on `chip`, from a program equal in every field if one was
  // prepared before (a cache keyed by content, not by address: a Program may be a temporary).
  const PreparedProgram& get(const isa::Program& program, const ChipConfig& chip);

 private:
  struct Entry {
    isa::Program program;
    PreparedProgram prepared;
  };
  size_t capacity_;
  size_t size_ = 0;
  std::unordered_map<uint64_t, std::vector<std::unique_ptr<Entry>>> entries_;
};

}  // namespace vtpu::sim
