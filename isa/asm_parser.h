// The assembler's parser: the pending instructions and label fix-ups, and the parser itself over
// the lexer's line cursor (asm_lexer.h).
//
// The parser is one class, Assembler: lines, labels and instructions in assembler.cc, constant
// expressions in asm_expressions.cc, operands in asm_operands.cc, directives and data in
// asm_directives.cc. Internal to isa/: include assembler.h instead.
#pragma once

#include "isa/asm_error.h"
#include "isa/asm_lexer.h"
#include "isa/program.h"

#include <fmt/format.h>

#include <bit>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <vector>

#include "isa/instruction_info.h"

namespace vtpu::isa::asm_detail {

struct LabelFixup {
  size_t instruction_index;
  int operand_index;
  std::string label;
  int line;
  int column;
};

struct PendingInstruction {
  Instruction instruction;
  int line;
};

class Assembler {
 public:
  Assembler(std::string_view name, const Defines& defines);

  static std::string_view strip_comment(std::string_view text);

  void line(std::string_view text, int line_number);

  // Parses ".rept COUNT[, NAME]"; COUNT is an expression over known symbols.
  std::pair<int64_t, std::string> rept_header(std::string_view text, int line_number);

  // Binds a .rept counter; unlike .set it may be rebound on every iteration.
  void bind_counter(const std::string& name, int64_t value) { symbols_[name] = value; }
  void unbind_counter(const std::string& name) { symbols_.erase(name); }
  bool has_symbol(const std::string& name) const { return symbols_.count(name) != 0; }

  Program finish();

 private:
  void define_label(std::string_view name, LineCursor& cur, int column);

  void expect_end(LineCursor& cur);

  // expr := term (('+'|'-') term)* ; term := unary (('*'|'/') unary)* ; unary := '-' unary | primary
  // Evaluated in 64 bits; every intermediate must stay within +-2^40 so no wrap can hide a typo.
  int64_t expression(LineCursor& cur, int depth = 0);
  int64_t term(LineCursor& cur, int depth);
  static int64_t in_range(LineCursor& cur, int column, int64_t value);
  int64_t unary(LineCursor& cur, int depth);
  int64_t number(LineCursor& cur);

  int register_number(LineCursor& cur, std::string_view prefix, int count, const char* what);

  int32_t operand(LineCursor& cur, Opcode op, OperandKind kind, int index);

  void instruction(std::string_view mnemonic, LineCursor& cur, int column);

  void flush_data(uint32_t new_origin);

  template <typename T>
  void append_data(T value);

  void directive(std::string_view word, LineCursor& cur, int column);

  void data_values(std::string_view word, LineCursor& cur);

  Program program_;
  std::vector<PendingInstruction> pending_;
  std::vector<LabelFixup> fixups_;
  std::map<std::string, size_t, std::less<>> labels_;
  std::map<std::string, int64_t, std::less<>> symbols_;
  DataSegment data_;
};

}  // namespace vtpu::isa::asm_detail
