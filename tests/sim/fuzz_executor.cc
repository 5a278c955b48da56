// Fuzz driver for the simulator: random programs the verifier admits run to the end or raise
// SimError (out of bounds, misaligned, deadlock, the step budget...), never crash, hang or throw
// anything else; and mutated chip presets parse or raise ConfigError. Programs are random
// instruction words of real opcodes (every operand field random, so registers, immediates,
// queues, semaphores and branch targets all vary) over two small buffers and a scalar, launched
// on one- and two-core chips. Run: fuzz-executor [programs] [preset mutations].
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <random>
#include <string>

#include "isa/instruction_info.h"
#include "isa/verifier.h"
#include "sim/chip_config.h"
#include "sim/sim_device.h"
#include "sim/sim_error.h"

using namespace vtpu;

namespace {

[[noreturn]] void fail(const std::string& what, const std::string& detail) {
  std::fprintf(stderr, "fuzz-executor: %s: %s\n", what.c_str(), detail.c_str());
  std::abort();
}

// A random program of `length` instructions (then halt): each a random real opcode with random
// operand bits, kept when it decodes.
isa::Program random_program(std::mt19937_64& rng, int length, bool multicore) {
  const auto table = isa::all_instructions();
  isa::Program p;
  p.name = "fuzz";
  p.multicore = multicore;
  p.arguments = {{"x", isa::ArgumentKind::Buffer}, {"y", isa::ArgumentKind::Buffer}, {"k", isa::ArgumentKind::Scalar}};
  while (static_cast<int>(p.code.size()) < length) {
    const auto& ins = table[rng() % table.size()];
    uint64_t operands = rng() & ((uint64_t{1} << isa::kOperandFieldBits) - 1);
    // Small operand values most of the time: registers and immediates near 0 reach VMEM and
    // argument addresses that exist, so programs get past their first instruction.
    if (rng() % 4 != 0) operands &= 0x0F0F0F0F0F0F0Full >> (rng() % 3);
    const uint64_t word = (uint64_t{ins.opcode_byte} << isa::kOpcodeShift) | (operands & ~ins.mask);
    try {
      const isa::Instruction decoded = isa::decode(word);
      if (decoded.opcode == isa::Opcode::Trap) continue;  // a trap is a deliberate failure, not a finding
      p.append(decoded);
    } catch (const isa::DecodeError&) {
    }
  }
  p.append(isa::Instruction{isa::Opcode::Halt, {}});
  return p;
}

enum class Outcome { Rejected, Finished, Raised };

// Runs `p` on `chip` with 4 KiB buffers: rejected by the verifier, run to its end, or stopped by
// a SimError.
Outcome run(const isa::Program& p, const sim::ChipConfig& chip, int32_t scalar) {
  if (!isa::verify(p, chip.target_limits()).empty()) return Outcome::Rejected;
  sim::SimOptions options;
  options.max_instructions = 20000;  // loops end in a SimError, not a hang
  sim::SimDevice device(chip, options);
  const auto x = device.allocate(4096), y = device.allocate(4096);
  const sim::KernelArg args[] = {sim::KernelArg::buffer(x, 4096), sim::KernelArg::buffer(y, 4096), sim::KernelArg::value(scalar)};
  try {
    device.wait(device.launch(p, args));
  } catch (const sim::SimError&) {
    return Outcome::Raised;
  }
  return Outcome::Finished;
}

void fuzz_presets(std::mt19937_64& rng, int mutations) {
  const std::string alphabet = "{}[]\":,0123456789.-e+ truefalsn\\x";
  for (const auto& name : sim::preset_names()) {
    const std::string original = sim::preset_json(name);
    for (int i = 0; i < mutations; ++i) {
      std::string text = original;
      const int edits = 1 + static_cast<int>(rng() % 4);
      for (int e = 0; e < edits; ++e) {
        const size_t at = rng() % (text.size() + 1);
        switch (rng() % 3) {
          case 0: text.insert(at, 1, alphabet[rng() % alphabet.size()]); break;
          case 1: if (at < text.size()) text.erase(at, 1 + rng() % 8); break;
          default: if (at < text.size()) text[at] = alphabet[rng() % alphabet.size()]; break;
        }
      }
      try {
        (void)sim::parse_chip_json(text, "fuzzed " + name);
      } catch (const sim::ConfigError&) {
      } catch (const std::exception& e) {
        fail("a mutated preset raised something other than ConfigError", e.what());
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int programs = argc > 1 ? std::atoi(argv[1]) : 3000;
  const int mutations = argc > 2 ? std::atoi(argv[2]) : 2000;
  std::mt19937_64 rng(2026);
  const sim::ChipConfig chips[] = {sim::load_chip("v5e"), sim::load_chip("v5p")};
  int outcomes[3] = {0, 0, 0};
  for (int i = 0; i < programs; ++i) {
    const bool multicore = rng() % 2;
    const auto p = random_program(rng, 1 + static_cast<int>(rng() % 24), multicore);
    try {
      ++outcomes[static_cast<int>(run(p, chips[i % 2], static_cast<int32_t>(rng() % 64)))];
    } catch (const std::exception& e) {
      fail("a verified program raised something other than SimError", e.what());
    }
  }
  fuzz_presets(rng, mutations);
  std::printf("fuzz-executor: %d random programs: %d rejected by the verifier, %d ran to the end, %d raised SimError; "
              "%d preset mutations per chip\n", programs, outcomes[0], outcomes[1], outcomes[2], mutations);
  return outcomes[1] > 0 && outcomes[2] > 0 ? 0 : 1;  // both paths exercised
}
