// What the assembler takes besides the text (symbols defined beforehand) and what it throws: an
// error with a 1-based line and column and the message alone. Shared by the public entry point
// (assembler.h) and the parser (asm_parser.h).
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>

namespace vtpu::isa {

class AsmError : public std::runtime_error {
 public:
  AsmError(int line, int column, const std::string& message)
      : std::runtime_error(fmt::format("{}:{}: {}", line, column, message)), line_(line), column_(column), message_(message) {}
  int line() const { return line_; }
  int column() const { return column_; }
  const std::string& message() const { return message_; }

 private:
  int line_;
  int column_;
  std::string message_;
};

using Defines = std::map<std::string, int64_t, std::less<>>;

}  // namespace vtpu::isa
