// Text -> Program. The grammar is one instruction or directive per line; see docs/isa.md.
// Errors carry a 1-based line and column and say what was expected; no input makes it crash.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>

#include "isa/program.h"

namespace vtpu::isa {

class AsmError : public std::runtime_error {
 public:
  AsmError(int line, int column, const std::string& message);
  int line() const { return line_; }
  int column() const { return column_; }
  const std::string& message() const { return message_; }

 private:
  int line_;
  int column_;
  std::string message_;
};

using Defines = std::map<std::string, int64_t, std::less<>>;

// `defines` are symbols set before the first line (like -D); `.default NAME, EXPR` in the source
// gives a value only when the name was not defined.
Program assemble(std::string_view source, std::string_view default_name = "program", const Defines& defines = {});

}  // namespace vtpu::isa
