// Program -> assembly text that assemble() turns back into an identical Program.
#pragma once

#include <string>

#include "isa/program.h"

namespace vtpu::isa {

std::string disassemble(const Program& program);
// One instruction without labels (branch targets printed as numbers), for error messages and traces.
std::string format_instruction(const Instruction& instruction);

}  // namespace vtpu::isa
