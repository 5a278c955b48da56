// Static facts about each opcode (mnemonic, unit, operand list, encoding, doc line), built once
// from isa_table.def. The assembler, disassembler, verifier, decoder and doc generator read only this.
#pragma once

#include <array>
#include <optional>
#include <span>
#include <string_view>

#include "isa/opcode.h"

namespace vtpu::isa {

struct InstructionInfo {
  Opcode opcode;
  std::string_view mnemonic;
  Unit unit;
  uint8_t opcode_byte;
  std::string_view operand_text;  // as written in the table, e.g. "sd sa i32"
  std::string_view doc;
  int operand_count;
  std::array<OperandKind, kMaxOperands> operands;
  // Encoding as a mask/match pair over the 64-bit word (Spike-style): a word w encodes this
  // instruction iff (w & mask) == match.
  uint64_t mask;
  uint64_t match;
  int operand_bits_used;
};

const InstructionInfo& info(Opcode opcode);
std::span<const InstructionInfo> all_instructions();
std::optional<Opcode> opcode_from_mnemonic(std::string_view mnemonic);
std::optional<Opcode> opcode_from_byte(uint8_t byte);

inline constexpr int kOpcodeShift = 56;
inline constexpr int kOperandFieldBits = 56;

}  // namespace vtpu::isa
