// A decoded instruction (opcode + operand values) and the 64-bit encoding it round-trips through.
// Layout: opcode byte in bits 63..56, operands packed from bit 55 downward in table order.
#pragma once

#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "isa/opcode.h"

namespace vtpu::isa {

struct Instruction {
  Opcode opcode = Opcode::Nop;
  // Register numbers, indices and immediates, in the table's operand order. Immediates are
  // sign-extended from their field width; labels are absolute instruction indices.
  std::array<int32_t, kMaxOperands> operands{};

  bool operator==(const Instruction&) const = default;
};

class DecodeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws std::out_of_range when an operand does not fit its field (the assembler checks first,
// so this only fires for hand-built Instructions).
uint64_t encode(const Instruction& instruction);
// Throws DecodeError for an unknown opcode byte or stray bits below the used operand fields.
Instruction decode(uint64_t word);

// Does `value` fit the field of this operand kind?
bool operand_fits(OperandKind kind, int64_t value);

}  // namespace vtpu::isa
