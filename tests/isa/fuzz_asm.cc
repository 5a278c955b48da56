// Fuzz target for the assembler. Built with -fsanitize=fuzzer it is a libFuzzer target; otherwise
// main() feeds it N random and mutated inputs. The property: assemble() returns or throws AsmError.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include "isa/assembler.h"
#include "isa/disassembler.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto program = vtpu::isa::assemble(std::string_view(reinterpret_cast<const char*>(data), size));
    if (vtpu::isa::assemble(vtpu::isa::disassemble(program)) != program) std::abort();
  } catch (const vtpu::isa::AsmError&) {
  }
  return 0;
}

#ifndef VTPU_LIBFUZZER
int main(int argc, char** argv) {
  const int iterations = argc > 1 ? std::atoi(argv[1]) : 10000;
  std::mt19937 rng(99);
  const std::string corpus = "loop:\n  sli s1, 4\n  vld v1, m0, s1, 0, 512\n  blt s1, s2, loop\n.rept 2, I\n saddi s[I], s1, I\n.endr\n";
  for (int i = 0; i < iterations; ++i) {
    std::string input = corpus;
    const int edits = 1 + static_cast<int>(rng() % 6);
    for (int e = 0; e < edits; ++e) {
      const size_t pos = rng() % (input.size() + 1);
      if (rng() % 2) input.insert(pos, 1, static_cast<char>(rng() % 256));
      else if (pos < input.size()) input.erase(pos, 1 + rng() % 4);
    }
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
  }
  std::printf("fuzz-asm: %d inputs, no crash\n", iterations);
  return 0;
}
#endif
