// vtpu-asm prog.s -o prog.vtpu : assemble (and verify for a chip with --chip-limits defaults).
#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "isa/assembler.h"

int main(int argc, char** argv) {
  std::string input, output;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-o" && i + 1 < argc) {
      output = argv[++i];
    } else if (a == "-h" || a == "--help") {
      std::cout << "usage: vtpu-asm PROG.s [-o PROG.vtpu]\n";
      return 0;
    } else {
      input = a;
    }
  }
  if (input.empty()) {
    std::cerr << "usage: vtpu-asm PROG.s [-o PROG.vtpu]\n";
    return 2;
  }
  std::ifstream in(input, std::ios::binary);
  if (!in) {
    std::cerr << fmt::format("vtpu-asm: cannot read {}\n", input);
    return 1;
  }
  std::stringstream text;
  text << in.rdbuf();
  try {
    auto program = vtpu::isa::assemble(text.str());
    if (output.empty()) output = input.substr(0, input.rfind('.')) + ".vtpu";
    auto bytes = vtpu::isa::serialize(program);
    std::ofstream out(output, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!out) {
      std::cerr << fmt::format("vtpu-asm: cannot write {}\n", output);
      return 1;
    }
    std::cout << fmt::format("{}: {} instructions, {} arguments -> {}\n", input, program.code.size(),
                             program.arguments.size(), output);
  } catch (const vtpu::isa::AsmError& e) {
    std::cerr << fmt::format("{}:{}\n", input, e.what());
    return 1;
  }
  return 0;
}
