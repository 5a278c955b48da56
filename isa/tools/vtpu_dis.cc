// vtpu-dis prog.vtpu : print assembly that reassembles to the same program.
#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <iterator>
#include <vector>

#include "isa/disassembler.h"
#include "isa/program.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: vtpu-dis PROG.vtpu\n";
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  if (!in) {
    std::cerr << fmt::format("vtpu-dis: cannot read {}\n", argv[1]);
    return 1;
  }
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  try {
    std::cout << vtpu::isa::disassemble(vtpu::isa::deserialize(bytes));
  } catch (const vtpu::isa::FormatError& e) {
    std::cerr << fmt::format("vtpu-dis: {}: {}\n", argv[1], e.what());
    return 1;
  }
  return 0;
}
