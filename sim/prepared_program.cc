#include "sim/prepared_program.h"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>

#include "isa/verifier.h"
#include "sim/sim_error.h"

namespace vtpu::sim {

PreparedProgram prepare(const isa::Program& program, const ChipConfig& chip) {
  if (program.mxu_dim != 0 && program.mxu_dim != static_cast<uint32_t>(chip.mxu_dim)) {
    throw SimError(SimErrorKind::BadLaunch, fmt::format("'{}' was generated for {}-wide MXUs; {}'s are {} wide", program.name,
                                                        program.mxu_dim, chip.name, chip.mxu_dim));
  }
  try {
    isa::verify_or_throw(program, chip.target_limits());
  } catch (const isa::VerifyError& e) {
    throw SimError(SimErrorKind::BadLaunch, fmt::format("'{}' on {}: {}", program.name, chip.name, e.what()));
  }
  PreparedProgram prepared;
  prepared.code.reserve(program.code.size());
  for (uint64_t word : program.code) prepared.code.push_back(isa::decode(word));
  prepared.flow = analyse_data_flow(prepared.code, std::max(1, chip.mxu_dim / 128));
  return prepared;
}

const PreparedProgram& PreparedPrograms::get(const isa::Program& program, const ChipConfig& chip) {
  // The code words identify a program well; equality on every field decides.
  const std::string_view words(reinterpret_cast<const char*>(program.code.data()), program.code.size() * sizeof(uint64_t));
  const uint64_t key = std::hash<std::string_view>{}(words) ^ (std::hash<std::string_view>{}(program.name) << 1);
  if (auto found = entries_.find(key); found != entries_.end()) {
    for (const auto& e : found->second) {
      if (e->program == program) return e->prepared;
    }
  }
  auto entry = std::make_unique<Entry>(Entry{program, prepare(program, chip)});  // throws before caching a bad program
  if (size_ >= capacity_) {  // rarely reached: forget everything rather than track ages
    entries_.clear();
    size_ = 0;
  }
  auto& slot = entries_[key];
  slot.push_back(std::move(entry));
  ++size_;
  return slot.back()->prepared;
}

}  // namespace vtpu::sim
