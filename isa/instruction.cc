// Table-driven encoder/decoder: both walk the operand list of InstructionInfo, so they cannot
// drift apart from each other or from the assembler.
#include "isa/instruction.h"

#include <fmt/format.h>

#include "isa/instruction_info.h"

namespace vtpu::isa {
namespace {

bool is_signed_immediate(OperandKind kind) {
  return kind == OperandKind::Imm16 || kind == OperandKind::Imm24 || kind == OperandKind::Imm32;
}

}  // namespace

bool operand_fits(OperandKind kind, int64_t value) {
  const int bits = operand_bits(kind);
  if (is_signed_immediate(kind)) {
    const int64_t lo = -(int64_t{1} << (bits - 1));
    const int64_t hi = (int64_t{1} << (bits - 1)) - 1;
    return value >= lo && value <= hi;
  }
  return value >= 0 && value < (int64_t{1} << bits);
}

uint64_t encode(const Instruction& instruction) {
  const InstructionInfo& meta = info(instruction.opcode);
  uint64_t word = meta.match;
  int shift = kOperandFieldBits;
  for (int i = 0; i < meta.operand_count; ++i) {
    const OperandKind kind = meta.operands[i];
    const int bits = operand_bits(kind);
    const int64_t value = instruction.operands[i];
    if (!operand_fits(kind, value)) {
      throw std::out_of_range(
          fmt::format("{}: operand {} = {} does not fit a {}-bit field", meta.mnemonic, i, value, bits));
    }
    shift -= bits;
    const uint64_t field_mask = (uint64_t{1} << bits) - 1;
    word |= (static_cast<uint64_t>(value) & field_mask) << shift;
  }
  return word;
}

Instruction decode(uint64_t word) {
  const auto opcode = opcode_from_byte(static_cast<uint8_t>(word >> kOpcodeShift));
  if (!opcode) {
    throw DecodeError(fmt::format("unknown opcode byte 0x{:02x} in word 0x{:016x}", word >> kOpcodeShift, word));
  }
  const InstructionInfo& meta = info(*opcode);
  Instruction out;
  out.opcode = *opcode;
  int shift = kOperandFieldBits;
  for (int i = 0; i < meta.operand_count; ++i) {
    const OperandKind kind = meta.operands[i];
    const int bits = operand_bits(kind);
    shift -= bits;
    const uint64_t raw = (word >> shift) & ((uint64_t{1} << bits) - 1);
    int64_t value = static_cast<int64_t>(raw);
    if (is_signed_immediate(kind) && (raw >> (bits - 1)) != 0) value -= int64_t{1} << bits;
    out.operands[i] = static_cast<int32_t>(value);
  }
  const uint64_t unused_mask = shift == 0 ? 0 : ((uint64_t{1} << shift) - 1);
  if ((word & unused_mask) != 0) {
    throw DecodeError(fmt::format("{}: stray bits in unused operand field of word 0x{:016x}", meta.mnemonic, word));
  }
  return out;
}

}  // namespace vtpu::isa
