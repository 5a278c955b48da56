// Instruction operands, parsed by the OperandKind list of the opcode's table row: registers,
// MXU, DMA queue and semaphore indices, immediates checked against their field widths, labels
// (asm_parser.h).
#include "isa/asm_parser.h"

#include <fmt/format.h>

namespace vtpu::isa::asm_detail {

int Assembler::register_number(LineCursor& cur, std::string_view prefix, int count, const char* what) {
  const int column = cur.column();
  std::string_view name = cur.identifier();
  if (name == prefix && cur.accept('[')) {
    // Computed register number, e.g. v[1 + i % 8] inside a .rept block.
    const int64_t value = expression(cur);
    if (!cur.accept(']')) cur.fail("expected ']'");
    if (value < 0 || value >= count) {
      cur.fail_at(column, fmt::format("{} index {} out of range ({}0..{}{})", what, value, prefix, prefix, count - 1));
    }
    return static_cast<int>(value);
  }
  if (name.size() <= prefix.size() || name.substr(0, prefix.size()) != prefix) {
    cur.fail_at(column, fmt::format("expected {} ({}0..{}{}), found '{}'", what, prefix, prefix, count - 1,
                                    name.empty() ? std::string(1, cur.peek()) : std::string(name)));
  }
  std::string_view digits = name.substr(prefix.size());
  int value = 0;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc() || ptr != digits.data() + digits.size() || value < 0 || value >= count) {
    cur.fail_at(column, fmt::format("expected {} ({}0..{}{}), found '{}'", what, prefix, prefix, count - 1, name));
  }
  return value;
}

int32_t Assembler::operand(LineCursor& cur, Opcode op, OperandKind kind, int index) {
  switch (kind) {
    case OperandKind::SRegDst: case OperandKind::SRegSrc:
      return register_number(cur, "s", kScalarRegs, "a scalar register");
    case OperandKind::VRegDst: case OperandKind::VRegSrc: case OperandKind::VGroupDst:
    case OperandKind::VGroupSrc: case OperandKind::VBlockDst: case OperandKind::VBlockSrc:
      return register_number(cur, "v", kVectorRegs, "a vector register");
    case OperandKind::MaskDst: case OperandKind::MaskSrc:
      return register_number(cur, "m", kMaskRegs, "a mask register");
    case OperandKind::Mxu: return register_number(cur, "mxu", 1 << operand_bits(kind), "an MXU");
    case OperandKind::DmaQueue: return register_number(cur, "dq", 1 << operand_bits(kind), "a DMA queue");
    case OperandKind::Semaphore: return register_number(cur, "sem", 1 << operand_bits(kind), "a semaphore");
    case OperandKind::Label: {
      const int column = cur.column();
      if (std::isdigit(static_cast<unsigned char>(cur.peek()))) {
        const int64_t target = number(cur);
        if (!operand_fits(kind, target)) cur.fail_at(column, "branch target out of range");
        return static_cast<int32_t>(target);
      }
      std::string_view name = cur.identifier();
      if (name.empty()) cur.fail_at(column, "expected a label");
      fixups_.push_back({pending_.size(), index, std::string(name), cur.line(), column});
      return 0;
    }
    case OperandKind::UImm8:
      if ((op == Opcode::Sarg || op == Opcode::Sargw) && is_ident_start(cur.peek())) {
        const int column = cur.column();
        std::string_view name = cur.identifier();
        for (size_t i = 0; i < program_.arguments.size(); ++i) {
          if (program_.arguments[i].name == name) return static_cast<int32_t>(i);
        }
        auto sym = symbols_.find(std::string(name));
        if (sym != symbols_.end() && operand_fits(kind, sym->second)) return static_cast<int32_t>(sym->second);
        cur.fail_at(column, fmt::format("unknown argument '{}' (declare it with .arg)", name));
      }
      [[fallthrough]];
    case OperandKind::Imm16: case OperandKind::Imm24: case OperandKind::Imm32: {
      const int column = cur.column();
      const int64_t value = expression(cur);
      // Imm32 also takes unsigned 32-bit patterns such as 0xffffffff.
      const int64_t wrapped = (kind == OperandKind::Imm32 && value > INT32_MAX && value <= UINT32_MAX)
                                  ? value - (int64_t{1} << 32)
                                  : value;
      if (!operand_fits(kind, wrapped)) {
        cur.fail_at(column, fmt::format("immediate {} does not fit {} ({} bits)", value,
                                        kind == OperandKind::UImm8 ? "an unsigned field" : "a signed field",
                                        operand_bits(kind)));
      }
      return static_cast<int32_t>(wrapped);
    }
  }
  cur.fail("internal: unhandled operand kind");
}

}  // namespace vtpu::isa::asm_detail
