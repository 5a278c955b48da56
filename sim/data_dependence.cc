#include "sim/data_dependence.h"

#include <bitset>

#include "isa/instruction_info.h"

namespace vtpu::sim {
using isa::Opcode;

bool is_comparison(Opcode op) {
  return op == Opcode::Vcmplt || op == Opcode::Vcmple || op == Opcode::Vcmpeq || op == Opcode::Vcmpne ||
         op == Opcode::Vicmplt;
}

bool timing_depends_on_data(const std::vector<isa::Instruction>& code) {
  // Mask registers that may hold a comparison's result: a comparison taints its destination and
  // mand/mnot pass taint on. Code order is not execution order (loops), so the taint is a union
  // over the whole program, grown until it stops changing; a register that some vmaskn also
  // writes stays tainted (conservative).
  std::bitset<32> tainted;
  for (bool grew = true; grew;) {
    grew = false;
    for (const auto& ins : code) {
      const auto& o = ins.operands;
      bool taint = false;
      if (is_comparison(ins.opcode)) taint = true;
      else if (ins.opcode == Opcode::Mand) taint = tainted[o[1]] || tainted[o[2]];
      else if (ins.opcode == Opcode::Mnot) taint = tainted[o[1]];
      if (taint && !tainted[o[0]]) {
        tainted[o[0]] = true;
        grew = true;
      }
    }
  }
  for (const auto& ins : code) {
    if (ins.opcode == Opcode::Sld) return true;
    const isa::Unit unit = isa::info(ins.opcode).unit;
    // Loads and stores take their mask as operand 1 (isa_table.def: "vd m sa i32 i32").
    if ((unit == isa::Unit::VLoad || unit == isa::Unit::VStore) && tainted[ins.operands[1]]) return true;
  }
  return false;
}

}  // namespace vtpu::sim
