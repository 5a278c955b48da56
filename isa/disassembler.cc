// Prints operands by their kind from the table; branch targets become labels "L<pc>" so the
// output reassembles to the same words.
#include "isa/disassembler.h"

#include <fmt/format.h>

#include <set>

#include "isa/instruction_info.h"

namespace vtpu::isa {
namespace {

// Labels at or below label_limit print as "L<pc>"; pass -1 for plain numbers.
std::string operand_text(OperandKind kind, int32_t value, int64_t label_limit) {
  switch (kind) {
    case OperandKind::SRegDst: case OperandKind::SRegSrc: return fmt::format("s{}", value);
    case OperandKind::VRegDst: case OperandKind::VRegSrc: case OperandKind::VGroupDst:
    case OperandKind::VGroupSrc: case OperandKind::VBlockDst: case OperandKind::VBlockSrc:
      return fmt::format("v{}", value);
    case OperandKind::MaskDst: case OperandKind::MaskSrc: return fmt::format("m{}", value);
    case OperandKind::Mxu: return fmt::format("mxu{}", value);
    case OperandKind::DmaQueue: return fmt::format("dq{}", value);
    case OperandKind::Semaphore: return fmt::format("sem{}", value);
    case OperandKind::Label: return value <= label_limit ? fmt::format("L{}", value) : fmt::format("{}", value);
    case OperandKind::Imm16: case OperandKind::Imm24: case OperandKind::Imm32: case OperandKind::UImm8:
      return fmt::format("{}", value);
  }
  return "?";
}

std::string instruction_text(const Instruction& ins, int64_t label_limit) {
  const InstructionInfo& meta = info(ins.opcode);
  std::string out(meta.mnemonic);
  for (int i = 0; i < meta.operand_count; ++i) {
    out += i == 0 ? " " : ", ";
    out += operand_text(meta.operands[i], ins.operands[i], label_limit);
  }
  return out;
}

}  // namespace

std::string format_instruction(const Instruction& instruction) { return instruction_text(instruction, -1); }

std::string disassemble(const Program& program) {
  std::string out;
  if (!program.name.empty()) out += fmt::format(".name {}\n", program.name);
  if (program.mxu_dim != 0) out += fmt::format(".mxu_dim {}\n", program.mxu_dim);
  if (program.multicore) out += ".multicore\n";
  for (const auto& arg : program.arguments) {
    out += fmt::format(".arg {} {}\n", arg.name, arg.kind == ArgumentKind::Buffer ? "buffer" : "scalar");
  }
  for (const auto& seg : program.data) {
    out += fmt::format(".data {}\n", seg.vmem_address);
    for (size_t i = 0; i < seg.bytes.size(); i += 16) {
      out += ".byte ";
      for (size_t j = i; j < std::min(seg.bytes.size(), i + 16); ++j) {
        out += fmt::format("{}{}", j == i ? "" : ", ", seg.bytes[j]);
      }
      out += "\n";
    }
  }
  std::vector<Instruction> decoded;
  std::set<int32_t> targets;
  for (uint64_t word : program.code) {
    decoded.push_back(decode(word));
    const InstructionInfo& meta = info(decoded.back().opcode);
    for (int i = 0; i < meta.operand_count; ++i) {
      if (meta.operands[i] == OperandKind::Label) targets.insert(decoded.back().operands[i]);
    }
  }
  // Targets past the end have no line to carry a label (the verifier rejects them, but the text
  // must still round-trip), so those stay numeric.
  const int64_t label_limit = static_cast<int64_t>(decoded.size());
  for (size_t pc = 0; pc <= decoded.size(); ++pc) {
    if (targets.count(static_cast<int32_t>(pc))) out += fmt::format("L{}:\n", pc);
    if (pc < decoded.size()) out += "  " + instruction_text(decoded[pc], label_limit) + "\n";
  }
  return out;
}

}  // namespace vtpu::isa
