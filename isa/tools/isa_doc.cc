// Writes docs/isa.md from the ISA table, so the reference can never disagree with the encoder.
#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <iostream>

#include "isa/instruction_info.h"

namespace {

std::string markdown_escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += "\\|";
    else out += c;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace vtpu::isa;
  std::string out;
  out += "# vtpu ISA reference\n\n";
  out += "Generated from `isa/isa_table.def` by `vtpu-isa-doc` (`meson compile -C build isa-doc`); do not edit.\n\n";
  out += "Every instruction is one 64-bit word: the opcode byte in bits 63..56, operands packed from bit 55\n";
  out += "downward in the order listed. Vector registers hold 8 sublanes x 128 lanes of 32-bit values.\n\n";
  out += "Operand kinds: `sd`/`sa` scalar register written/read (s0..s31, 5 bits); `vd`/`va` vector register\n";
  out += "(v0..v31, 5 bits); `gd`/`ga` a group of mxu_dim/128 consecutive vregs; `td`/`ta` 16 consecutive vregs;\n";
  out += "`md`/`ma` mask register (m0..m7, 3 bits; m0 is all-true and read-only); `x` MXU (mxu0.., 3 bits);\n";
  out += "`dq` DMA queue (dq0.., 2 bits); `sem` semaphore (sem0..sem31, 5 bits); `i16`/`i24`/`i32` signed\n";
  out += "immediates; `u8` unsigned 8-bit immediate; `L` branch target (label or instruction index, 24 bits).\n\n";
  out += "Assembly: one instruction per line, operands separated by commas; `label:`; comments start with\n";
  out += "`;`, `#` or `//`. Immediates are integer expressions (`+ - * /`, parentheses, symbols from `.set`),\n";
  out += "or float literals such as `1.5f` (their f32 bits). Directives: `.name N`, `.arg NAME buffer|scalar`,\n";
  out += "`.set NAME, EXPR`, `.data VMEM_ADDR` followed by `.f32`, `.bf16`, `.i32`, `.i8`, `.byte` values,\n";
  out += "`.mxu_dim D` (the MXU width the code is written for: a launch on a chip of another width is refused),\n";
  out += "`.multicore` (the code divides its work among the launch's TensorCores with `score` and `sncore`,\n"
         "so a device runs it on every TensorCore of the chip; other programs run on one).\n\n";
  std::string_view unit;
  for (const auto& meta : all_instructions()) {
    if (unit_name(meta.unit) != unit) {
      unit = unit_name(meta.unit);
      out += fmt::format("\n## {} unit\n\n| mnemonic | operands | encoding (mask / match) | meaning |\n|---|---|---|---|\n", unit);
    }
    out += fmt::format("| `{}` | `{}` | `0x{:016x}` / `0x{:016x}` | {} |\n", meta.mnemonic,
                       meta.operand_text.empty() ? "-" : meta.operand_text, meta.mask, meta.match,
                       markdown_escape(meta.doc));
  }
  if (argc < 2) {
    std::cout << out;
    return 0;
  }
  std::ofstream file(argv[1]);
  file << out;
  return file.good() ? 0 : 1;
}
