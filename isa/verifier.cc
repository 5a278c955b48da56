// The verifier walks the code once. Constant propagation is deliberately local: scalar values are
// forgotten at every branch target, so a check fires only when the address is certain.
#include "isa/verifier.h"

#include <fmt/format.h>

#include <array>
#include <optional>
#include <set>

#include "isa/disassembler.h"
#include "isa/instruction_info.h"

namespace vtpu::isa {
namespace {

constexpr int kLanes = 128;
constexpr int kSublanes = 8;

using KnownScalars = std::array<std::optional<int64_t>, kScalarRegs>;

std::string render_issues(const std::vector<VerifyIssue>& issues) {
  std::string out = fmt::format("program failed verification ({} issue{}):", issues.size(),
                                issues.size() == 1 ? "" : "s");
  for (const auto& issue : issues) {
    if (issue.pc == SIZE_MAX) {
      out += fmt::format("\n  program: {}", issue.message);
    } else {
      out += fmt::format("\n  instruction {}: {}", issue.pc, issue.message);
    }
  }
  return out;
}

class Checker {
 public:
  Checker(const Program& program, const TargetLimits& limits) : program_(program), limits_(limits) {}

  std::vector<VerifyIssue> run() {
    for (size_t i = 0; i < program_.data.size(); ++i) {
      const auto& seg = program_.data[i];
      if (seg.vmem_address + uint64_t{seg.bytes.size()} > limits_.vmem_bytes) {
        issues_.push_back({SIZE_MAX, fmt::format("data segment {} [{}, {}) lies outside VMEM ({} bytes)", i,
                                                 seg.vmem_address, seg.vmem_address + seg.bytes.size(),
                                                 limits_.vmem_bytes)});
      }
    }
    std::vector<Instruction> code;
    for (size_t pc = 0; pc < program_.code.size(); ++pc) {
      try {
        code.push_back(decode(program_.code[pc]));
      } catch (const DecodeError& e) {
        issues_.push_back({pc, e.what()});
        code.push_back(Instruction{});
      }
    }
    for (const auto& ins : code) {
      if (ins.opcode == Opcode::Sargw) written_args_.insert(ins.operands[0]);
    }
    std::set<int32_t> block_starts;
    for (const auto& ins : code) {
      const auto& meta = info(ins.opcode);
      for (int i = 0; i < meta.operand_count; ++i) {
        if (meta.operands[i] == OperandKind::Label) block_starts.insert(ins.operands[i]);
      }
    }
    KnownScalars known{};
    for (size_t pc = 0; pc < code.size(); ++pc) {
      if (block_starts.count(static_cast<int32_t>(pc))) known.fill(std::nullopt);
      check(pc, code[pc], known);
      propagate(code[pc], known);
    }
    return std::move(issues_);
  }

 private:
  void issue(size_t pc, const Instruction& ins, const std::string& message) {
    issues_.push_back({pc, fmt::format("{}: {}", format_instruction(ins), message)});
  }

  void check_register_group(size_t pc, const Instruction& ins, int reg, int width) {
    if (reg + width > kVectorRegs) {
      issue(pc, ins, fmt::format("register group v{}..v{} runs past v{}", reg, reg + width - 1, kVectorRegs - 1));
    }
  }

  void check_vmem(size_t pc, const Instruction& ins, int64_t lo, int64_t hi) {
    if (lo < 0 || hi > static_cast<int64_t>(limits_.vmem_bytes)) {
      issue(pc, ins, fmt::format("VMEM access [{}, {}) outside VMEM [0, {})", lo, hi, limits_.vmem_bytes));
    }
  }

  void check(size_t pc, const Instruction& ins, const KnownScalars& known) {
    const auto& meta = info(ins.opcode);
    const int group = std::max(1, limits_.mxu_dim / kLanes);
    for (int i = 0; i < meta.operand_count; ++i) {
      const int32_t v = ins.operands[i];
      switch (meta.operands[i]) {
        case OperandKind::MaskDst:
          if (v == 0) issue(pc, ins, "m0 is the all-true mask and cannot be written");
          break;
        case OperandKind::VGroupDst: case OperandKind::VGroupSrc: check_register_group(pc, ins, v, group); break;
        case OperandKind::VBlockDst: case OperandKind::VBlockSrc: check_register_group(pc, ins, v, kVBlockRegs); break;
        case OperandKind::Mxu:
          if (v >= limits_.mxu_count) issue(pc, ins, fmt::format("mxu{} does not exist (chip has {})", v, limits_.mxu_count));
          break;
        case OperandKind::DmaQueue:
          if (v >= limits_.dma_queues) issue(pc, ins, fmt::format("dq{} does not exist (chip has {})", v, limits_.dma_queues));
          break;
        case OperandKind::Semaphore:
          if (v >= limits_.semaphores) issue(pc, ins, fmt::format("sem{} does not exist (chip has {})", v, limits_.semaphores));
          break;
        case OperandKind::Label:
          if (v > static_cast<int32_t>(program_.code.size())) {
            issue(pc, ins, fmt::format("branch target {} past the end of the program ({} instructions)", v,
                                       program_.code.size()));
          }
          break;
        default: break;
      }
    }
    switch (ins.opcode) {
      case Opcode::Sarg:  // a slot past the declared arguments is scratch some sargw writes
        if (ins.operands[1] >= static_cast<int32_t>(program_.arguments.size()) && !written_args_.count(ins.operands[1])) {
          issue(pc, ins, fmt::format("argument #{} not declared (program has {}) and never written by sargw",
                                     ins.operands[1], program_.arguments.size()));
        }
        break;
      case Opcode::Sshli: case Opcode::Sshri:
        if (ins.operands[2] >= 32) issue(pc, ins, "shift amount must be < 32");
        break;
      case Opcode::Vbcastl:
        if (ins.operands[2] >= kLanes) issue(pc, ins, "lane index must be < 128");
        break;
      case Opcode::Vbcasts:
        if (ins.operands[2] >= kSublanes) issue(pc, ins, "sublane index must be < 8");
        break;
      case Opcode::Mxmm: case Opcode::Mxmmi8:
        if (ins.operands[2] >= limits_.mxu_acc_slots) {
          issue(pc, ins, fmt::format("accumulator slot {} out of range (chip has {})", ins.operands[2], limits_.mxu_acc_slots));
        }
        break;
      case Opcode::Mxpop:
        if (ins.operands[2] >= limits_.mxu_acc_slots) {
          issue(pc, ins, fmt::format("accumulator slot {} out of range (chip has {})", ins.operands[2], limits_.mxu_acc_slots));
        }
        break;
      default: break;
    }
    check_static_vmem(pc, ins, known);
  }

  void check_static_vmem(size_t pc, const Instruction& ins, const KnownScalars& known) {
    const auto& meta = info(ins.opcode);
    if (meta.unit == Unit::VLoad || meta.unit == Unit::VStore) {
      const auto base = known[ins.operands[2]];
      const int elem = vector_element_bytes(ins.opcode);
      if (base) {
        const int64_t first = *base + ins.operands[3];
        const int64_t last = first + int64_t{kSublanes - 1} * ins.operands[4];
        if (first % elem != 0) issue(pc, ins, fmt::format("address {} not aligned to {} bytes", first, elem));
        check_vmem(pc, ins, std::min(first, last), std::max(first, last) + kLanes * elem);
      }
    } else if (is_weight_load(ins.opcode)) {
      const auto base = known[ins.operands[1]];
      const int elem = ins.opcode == Opcode::Mxlwi8 ? 1 : 2;
      if (base) {
        const int64_t last = *base + int64_t{limits_.mxu_dim - 1} * ins.operands[2];
        check_vmem(pc, ins, std::min(*base, last), std::max(*base, last) + int64_t{limits_.mxu_dim} * elem);
      }
    } else if (meta.unit == Unit::Dma && ins.opcode != Opcode::Dmaremote) {  // dma.remote touches no VMEM
      const auto vmem = known[ins.operands[2]];
      const auto rows = known[ins.operands[4]];
      const auto row_bytes = known[ins.operands[5]];
      const auto stride = known[ins.operands[6]];
      if (vmem && rows && row_bytes && stride && *rows > 0) {
        const int64_t last = *vmem + (*rows - 1) * *stride;
        check_vmem(pc, ins, std::min(*vmem, last), std::max(*vmem, last) + *row_bytes);
      }
    }
  }

  static void propagate(const Instruction& ins, KnownScalars& known) {
    const auto a = [&](int i) { return known[ins.operands[i]]; };
    std::optional<int64_t> result;
    switch (ins.opcode) {
      case Opcode::Sli: result = ins.operands[1]; break;
      case Opcode::Smov: result = a(1); break;
      case Opcode::Sadd: if (a(1) && a(2)) result = static_cast<int32_t>(*a(1) + *a(2)); break;
      case Opcode::Saddi: if (a(1)) result = static_cast<int32_t>(*a(1) + ins.operands[2]); break;
      case Opcode::Ssub: if (a(1) && a(2)) result = static_cast<int32_t>(*a(1) - *a(2)); break;
      case Opcode::Smuli: if (a(1)) result = static_cast<int32_t>(*a(1) * ins.operands[2]); break;
      case Opcode::Smul: if (a(1) && a(2)) result = static_cast<int32_t>(*a(1) * *a(2)); break;
      default: break;
    }
    const auto& meta = info(ins.opcode);
    if (meta.operand_count > 0 && meta.operands[0] == OperandKind::SRegDst) known[ins.operands[0]] = result;
  }

  const Program& program_;
  const TargetLimits& limits_;
  std::vector<VerifyIssue> issues_;
  std::set<int32_t> written_args_;  // argument slots some sargw writes
};

}  // namespace

int vector_element_bytes(Opcode opcode) { return kElementBytes[static_cast<size_t>(opcode)]; }

VerifyError::VerifyError(std::vector<VerifyIssue> issues)
    : std::runtime_error(render_issues(issues)), issues_(std::move(issues)) {}

std::vector<VerifyIssue> verify(const Program& program, const TargetLimits& limits) {
  return Checker(program, limits).run();
}

void verify_or_throw(const Program& program, const TargetLimits& limits) {
  auto issues = verify(program, limits);
  if (!issues.empty()) throw VerifyError(std::move(issues));
}

}  // namespace vtpu::isa
