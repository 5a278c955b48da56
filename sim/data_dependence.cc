#include "sim/data_dependence.h"

#include <bitset>
#include <vector>

#include "isa/instruction_info.h"

namespace vtpu::sim {

using isa::Opcode;
using isa::OperandKind;

bool is_comparison(Opcode op) {
  return op == Opcode::Vcmplt || op == Opcode::Vcmple || op == Opcode::Vcmpeq || op == Opcode::Vcmpne ||
         op == Opcode::Vicmplt;
}

namespace {

// Vector registers 0..31, then mask registers at 32..39.
constexpr int kMaskBase = isa::kVectorRegs;
using Registers = std::bitset<isa::kVectorRegs + isa::kMaskRegs>;

struct Operands {
  Registers sources, destinations;
};

Operands registers_of(const isa::Instruction& ins, int group_regs) {
  Operands r;
  const auto& info = isa::info(ins.opcode);
  for (int i = 0; i < info.operand_count; ++i) {
    const int reg = ins.operands[i];
    const auto add = [&](Registers& set, int first, int count) {
      for (int k = 0; k < count && first + k < isa::kVectorRegs; ++k) set[first + k] = true;
    };
    switch (info.operands[i]) {
      case OperandKind::VRegSrc: add(r.sources, reg, 1); break;
      case OperandKind::VGroupSrc: add(r.sources, reg, group_regs); break;
      case OperandKind::VBlockSrc: add(r.sources, reg, isa::kVBlockRegs); break;
      case OperandKind::MaskSrc: r.sources[kMaskBase + reg] = true; break;
      case OperandKind::VRegDst: add(r.destinations, reg, 1); break;
      case OperandKind::VGroupDst: add(r.destinations, reg, group_regs); break;
      case OperandKind::VBlockDst: add(r.destinations, reg, isa::kVBlockRegs); break;
      case OperandKind::MaskDst: r.destinations[kMaskBase + reg] = true; break;
      default: break;
    }
  }
  return r;
}

// Loads and pops bring data in whatever their operands hold.
bool brings_data(const isa::Instruction& ins) {
  return isa::info(ins.opcode).unit == isa::Unit::VLoad || ins.opcode == Opcode::Mxpop;
}

// Where control may go after `ins` at `pc`.
std::vector<size_t> successors(const isa::Instruction& ins, size_t pc, size_t size) {
  std::vector<size_t> next;
  switch (ins.opcode) {
    case Opcode::Halt: case Opcode::Trap: break;
    case Opcode::Jmp: next.push_back(static_cast<size_t>(ins.operands[0])); break;
    case Opcode::Blt: case Opcode::Bge: case Opcode::Beq: case Opcode::Bne:
      next.push_back(static_cast<size_t>(ins.operands[2]));
      next.push_back(pc + 1);
      break;
    default: next.push_back(pc + 1);
  }
  std::erase_if(next, [&](size_t n) { return n >= size; });
  return next;
}

}  // namespace

DataFlow analyse_data_flow(const std::vector<isa::Instruction>& code, int group_regs) {
  // Flow-sensitive, since generated kernels reuse registers: a register holding a lane index in
  // the prologue may hold loaded data in the loop. tainted_in[pc]: registers that may hold data
  // when `pc` starts, over every path to it (a forward data-flow problem, solved by a worklist;
  // taint only grows, so it ends).
  const size_t n = code.size();
  std::vector<Operands> operands;
  std::vector<std::vector<size_t>> next;
  operands.reserve(n);
  next.reserve(n);
  for (size_t pc = 0; pc < n; ++pc) {
    operands.push_back(registers_of(code[pc], group_regs));
    next.push_back(successors(code[pc], pc, n));
  }
  std::vector<Registers> tainted_in(n);
  std::vector<uint8_t> queued(n, 0), reached(n, 0);
  std::vector<size_t> work;
  if (n) {
    work.push_back(0);
    queued[0] = reached[0] = 1;
  }
  const auto out_of = [&](size_t pc) {
    const auto& r = operands[pc];
    Registers out = tainted_in[pc] & ~r.destinations;
    // A load's mask only chooses lanes; what it writes is data either way.
    if (brings_data(code[pc]) || (r.sources & tainted_in[pc]).any()) out |= r.destinations;
    return out;
  };
  while (!work.empty()) {
    const size_t pc = work.back();
    work.pop_back();
    queued[pc] = 0;
    const Registers out = out_of(pc);
    for (size_t s : next[pc]) {
      const Registers merged = tainted_in[s] | out;
      if (reached[s] && merged == tainted_in[s]) continue;
      tainted_in[s] = merged;
      reached[s] = 1;
      if (!queued[s]) {
        queued[s] = 1;
        work.push_back(s);
      }
    }
  }
  DataFlow flow;
  flow.computes_untainted.resize(n);
  for (size_t pc = 0; pc < n; ++pc) {
    const auto& ins = code[pc];
    const auto& r = operands[pc];
    flow.computes_untainted[pc] = r.destinations.any() && (out_of(pc) & r.destinations).none();
    const isa::Unit unit = isa::info(ins.opcode).unit;
    // Loads and stores take their mask as operand 1 (isa_table.def: "vd ma sa i16 i24").
    const bool masked_access = unit == isa::Unit::VLoad || unit == isa::Unit::VStore;
    if (ins.opcode == Opcode::Sld || (masked_access && tainted_in[pc][kMaskBase + ins.operands[1]])) {
      flow.depends_on_data = true;
    }
  }
  return flow;
}

}  // namespace vtpu::sim
