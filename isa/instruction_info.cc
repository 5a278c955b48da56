// Expands isa_table.def into the InstructionInfo array and parses each row's operand string once.
#include "isa/instruction_info.h"

#include <fmt/format.h>

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

namespace vtpu::isa {
namespace {

struct RawRow {
  Opcode opcode;
  std::string_view mnemonic;
  Unit unit;
  uint8_t byte;
  std::string_view operands;
  std::string_view doc;
};

constexpr RawRow kRows[] = {
#define VTPU_INSN(ident, mnemonic, unit, byte, element_bytes, operands, doc) \
  {Opcode::ident, mnemonic, Unit::unit, byte, operands, doc},
#include "isa/isa_table.def"
#undef VTPU_INSN
};

OperandKind parse_operand_token(std::string_view token, std::string_view mnemonic) {
  static const std::unordered_map<std::string_view, OperandKind> kTokens = {
      {"sd", OperandKind::SRegDst},    {"sa", OperandKind::SRegSrc},     {"vd", OperandKind::VRegDst},
      {"va", OperandKind::VRegSrc},    {"gd", OperandKind::VGroupDst},   {"ga", OperandKind::VGroupSrc},
      {"td", OperandKind::VBlockDst},  {"ta", OperandKind::VBlockSrc},   {"md", OperandKind::MaskDst},
      {"ma", OperandKind::MaskSrc},    {"x", OperandKind::Mxu},          {"dq", OperandKind::DmaQueue},
      {"sem", OperandKind::Semaphore}, {"i16", OperandKind::Imm16},      {"i24", OperandKind::Imm24},
      {"i32", OperandKind::Imm32},     {"u8", OperandKind::UImm8},       {"L", OperandKind::Label},
  };
  auto it = kTokens.find(token);
  if (it == kTokens.end()) {
    throw std::logic_error(fmt::format("isa_table.def: unknown operand token '{}' in {}", token, mnemonic));
  }
  return it->second;
}

std::vector<InstructionInfo> build_table() {
  std::vector<InstructionInfo> table;
  for (const RawRow& row : kRows) {
    InstructionInfo info{};
    info.opcode = row.opcode;
    info.mnemonic = row.mnemonic;
    info.unit = row.unit;
    info.opcode_byte = row.byte;
    info.operand_text = row.operands;
    info.doc = row.doc;
    std::string_view rest = row.operands;
    while (!rest.empty()) {
      size_t space = rest.find(' ');
      std::string_view token = rest.substr(0, space);
      if (!token.empty()) {
        if (info.operand_count == kMaxOperands) {
          throw std::logic_error(fmt::format("isa_table.def: too many operands for {}", row.mnemonic));
        }
        OperandKind kind = parse_operand_token(token, row.mnemonic);
        info.operands[info.operand_count++] = kind;
        info.operand_bits_used += operand_bits(kind);
      }
      rest = space == std::string_view::npos ? std::string_view{} : rest.substr(space + 1);
    }
    if (info.operand_bits_used > kOperandFieldBits) {
      throw std::logic_error(fmt::format("isa_table.def: operands of {} need {} bits, only {} available",
                                         row.mnemonic, info.operand_bits_used, kOperandFieldBits));
    }
    info.mask = uint64_t{0xff} << kOpcodeShift;
    info.match = uint64_t{row.byte} << kOpcodeShift;
    table.push_back(info);
  }
  return table;
}

const std::vector<InstructionInfo>& table() {
  static const std::vector<InstructionInfo> kTable = build_table();
  return kTable;
}

}  // namespace

std::string_view unit_name(Unit unit) {
  switch (unit) {
    case Unit::Scalar: return "scalar";
    case Unit::Branch: return "branch";
    case Unit::Vpu: return "vpu";
    case Unit::Transc: return "transcendental";
    case Unit::Xlane: return "cross-lane";
    case Unit::VLoad: return "vector-load";
    case Unit::VStore: return "vector-store";
    case Unit::Mxu: return "mxu";
    case Unit::Dma: return "dma";
    case Unit::Sync: return "sync";
  }
  return "?";
}

int operand_bits(OperandKind kind) {
  switch (kind) {
    case OperandKind::SRegDst: case OperandKind::SRegSrc:
    case OperandKind::VRegDst: case OperandKind::VRegSrc:
    case OperandKind::VGroupDst: case OperandKind::VGroupSrc:
    case OperandKind::VBlockDst: case OperandKind::VBlockSrc:
    case OperandKind::Semaphore:
      return 5;
    case OperandKind::MaskDst: case OperandKind::MaskSrc: case OperandKind::Mxu:
      return 3;
    case OperandKind::DmaQueue: return 2;
    case OperandKind::Imm16: return 16;
    case OperandKind::Imm24: case OperandKind::Label: return 24;
    case OperandKind::Imm32: return 32;
    case OperandKind::UImm8: return 8;
  }
  return 0;
}

bool is_register_kind(OperandKind kind) {
  switch (kind) {
    case OperandKind::SRegDst: case OperandKind::SRegSrc: case OperandKind::VRegDst:
    case OperandKind::VRegSrc: case OperandKind::VGroupDst: case OperandKind::VGroupSrc:
    case OperandKind::VBlockDst: case OperandKind::VBlockSrc: case OperandKind::MaskDst:
    case OperandKind::MaskSrc:
      return true;
    default:
      return false;
  }
}

bool is_destination(OperandKind kind) {
  return kind == OperandKind::SRegDst || kind == OperandKind::VRegDst || kind == OperandKind::VGroupDst ||
         kind == OperandKind::VBlockDst || kind == OperandKind::MaskDst;
}

const InstructionInfo& info(Opcode opcode) { return table()[static_cast<size_t>(opcode)]; }

std::span<const InstructionInfo> all_instructions() { return table(); }

std::optional<Opcode> opcode_from_mnemonic(std::string_view mnemonic) {
  static const auto kByName = [] {
    std::unordered_map<std::string_view, Opcode> map;
    for (const auto& entry : table()) map.emplace(entry.mnemonic, entry.opcode);
    return map;
  }();
  auto it = kByName.find(mnemonic);
  if (it == kByName.end()) return std::nullopt;
  return it->second;
}

std::optional<Opcode> opcode_from_byte(uint8_t byte) {
  static const auto kByByte = [] {
    std::array<int16_t, 256> map;
    map.fill(-1);
    for (const auto& entry : table()) map[entry.opcode_byte] = static_cast<int16_t>(entry.opcode);
    return map;
  }();
  if (kByByte[byte] < 0) return std::nullopt;
  return static_cast<Opcode>(kByByte[byte]);
}

}  // namespace vtpu::isa
