// Text -> Program. The grammar is one instruction or directive per line; see docs/isa.md.
// Errors carry a 1-based line and column and say what was expected; no input makes it crash.
#pragma once

#include <string_view>

#include "isa/asm_error.h"
#include "isa/program.h"

namespace vtpu::isa {

// `defines` are symbols set before the first line (like -D); `.default NAME, EXPR` in the source
// gives a value only when the name was not defined.
Program assemble(std::string_view source, std::string_view default_name = "program", const Defines& defines = {});

}  // namespace vtpu::isa
