// Assembly text to a Program: single pass over lines with label fix-ups at the end, `.rept`
// blocks expanded before parsing. Operand parsing is driven by the OperandKind list of each
// opcode, so a new table row needs no assembler change (the parser is in asm_parser.h).
#include "isa/assembler.h"

#include <fmt/format.h>

#include "isa/asm_parser.h"

namespace vtpu::isa {
namespace asm_detail {

Assembler::Assembler(std::string_view name, const Defines& defines) : symbols_(defines.begin(), defines.end()) {
  program_.name = std::string(name);
}

std::string_view Assembler::strip_comment(std::string_view text) {
  // ';', '#' and '//' start a comment.
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == ';' || text[i] == '#' || (text[i] == '/' && i + 1 < text.size() && text[i + 1] == '/')) {
      return text.substr(0, i);
    }
  }
  return text;
}

void Assembler::line(std::string_view text, int line_number) {
  LineCursor cur(strip_comment(text), line_number);
  if (cur.at_end()) return;
  const int word_column = cur.column();
  std::string_view word = cur.identifier();
  if (word.empty()) cur.fail("expected an instruction, a directive or a label");
  if (cur.accept(':')) {
    define_label(word, cur, word_column);
    if (cur.at_end()) return;
    const int next_column = cur.column();
    word = cur.identifier();
    if (word.empty()) cur.fail_at(next_column, "expected an instruction after the label");
    if (word.front() == '.') return directive(word, cur, next_column);
    return instruction(word, cur, next_column);
  }
  if (word.front() == '.' && !opcode_from_mnemonic(word)) return directive(word, cur, word_column);
  instruction(word, cur, word_column);
}

// Parses ".rept COUNT[, NAME]"; COUNT is an expression over known symbols.
std::pair<int64_t, std::string> Assembler::rept_header(std::string_view text, int line_number) {
  LineCursor cur(strip_comment(text), line_number);
  cur.identifier();  // ".rept"
  const int column = cur.column();
  const int64_t count = expression(cur);
  if (count < 0 || count > 65536) cur.fail_at(column, fmt::format(".rept count {} out of range (0..65536)", count));
  std::string name;
  if (cur.accept(',')) {
    name = std::string(cur.identifier());
    if (name.empty()) cur.fail("expected a counter name after ','");
  }
  expect_end(cur);
  return {count, name};
}

Program Assembler::finish() {
  for (const auto& fix : fixups_) {
    auto it = labels_.find(fix.label);
    if (it == labels_.end()) throw AsmError(fix.line, fix.column, fmt::format("undefined label '{}'", fix.label));
    pending_[fix.instruction_index].instruction.operands[fix.operand_index] = static_cast<int32_t>(it->second);
  }
  for (const auto& p : pending_) program_.code.push_back(encode(p.instruction));
  if (!data_.bytes.empty()) program_.data.push_back(std::move(data_));
  return std::move(program_);
}

void Assembler::define_label(std::string_view name, LineCursor& cur, int column) {
  if (name.front() == '.') cur.fail_at(column, fmt::format("label '{}' may not start with '.'", name));
  if (opcode_from_mnemonic(name)) cur.fail_at(column, fmt::format("label '{}' is a mnemonic", name));
  if (!labels_.emplace(std::string(name), pending_.size()).second) {
    cur.fail_at(column, fmt::format("label '{}' defined twice", name));
  }
}

void Assembler::expect_end(LineCursor& cur) {
  if (!cur.at_end()) cur.fail(fmt::format("expected end of line, found '{}'", cur.peek()));
}

void Assembler::instruction(std::string_view mnemonic, LineCursor& cur, int column) {
  const auto op = opcode_from_mnemonic(mnemonic);
  if (!op) cur.fail_at(column, fmt::format("unknown mnemonic '{}'", mnemonic));
  const InstructionInfo& meta = info(*op);
  Instruction ins;
  ins.opcode = *op;
  for (int i = 0; i < meta.operand_count; ++i) {
    if (i > 0 && !cur.accept(',')) {
      cur.fail(fmt::format("expected ',' before operand {} of {} (operands: {})", i + 1, meta.mnemonic,
                           meta.operand_text));
    }
    if (cur.at_end()) {
      cur.fail(fmt::format("{} takes {} operands ({}), got {}", meta.mnemonic, meta.operand_count,
                           meta.operand_text, i));
    }
    ins.operands[i] = operand(cur, *op, meta.operands[i], i);
  }
  expect_end(cur);
  pending_.push_back({ins, cur.line()});
}

}  // namespace asm_detail

using asm_detail::Assembler;
using asm_detail::is_ident_char;

namespace {

struct SourceLine {
  std::string_view text;
  int number;
};

std::string_view first_word(std::string_view text) {
  size_t i = 0;
  while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
  size_t j = i;
  while (j < text.size() && is_ident_char(text[j])) ++j;
  return text.substr(i, j - i);
}

constexpr int64_t kMaxExpandedLines = 1 << 22;

// Feeds lines to the assembler, expanding ".rept COUNT, NAME" ... ".endr" blocks (nestable):
// the body is assembled COUNT times with NAME bound to 0..COUNT-1.
void feed(Assembler& as, const std::vector<SourceLine>& lines, size_t begin, size_t end, int64_t& budget) {
  for (size_t i = begin; i < end; ++i) {
    const std::string_view word = first_word(lines[i].text);
    if (word == ".endr") throw AsmError(lines[i].number, 1, "'.endr' without '.rept'");
    if (word != ".rept") {
      if (--budget < 0) throw AsmError(lines[i].number, 1, "program expands to too many lines (.rept too large)");
      as.line(lines[i].text, lines[i].number);
      continue;
    }
    // Find the matching .endr.
    int depth = 1;
    size_t close = i + 1;
    for (; close < end; ++close) {
      const std::string_view w = first_word(lines[close].text);
      if (w == ".rept") ++depth;
      if (w == ".endr" && --depth == 0) break;
    }
    if (close >= end) throw AsmError(lines[i].number, 1, "'.rept' without matching '.endr'");
    const auto [count, counter] = as.rept_header(lines[i].text, lines[i].number);
    if (!counter.empty() && as.has_symbol(counter)) {
      throw AsmError(lines[i].number, 1, fmt::format("'.rept' counter '{}' is already a symbol", counter));
    }
    for (int64_t k = 0; k < count; ++k) {
      if (!counter.empty()) as.bind_counter(counter, k);
      feed(as, lines, i + 1, close, budget);
    }
    if (!counter.empty()) as.unbind_counter(counter);
    i = close;
  }
}

}  // namespace

Program assemble(std::string_view source, std::string_view default_name, const Defines& defines) {
  Assembler as(default_name, defines);
  std::vector<SourceLine> lines;
  int line_number = 1;
  size_t start = 0;
  while (start <= source.size()) {
    size_t end = source.find('\n', start);
    if (end == std::string_view::npos) end = source.size();
    lines.push_back({source.substr(start, end - start), line_number});
    ++line_number;
    start = end + 1;
  }
  int64_t budget = kMaxExpandedLines;
  feed(as, lines, 0, lines.size(), budget);
  return as.finish();
}

}  // namespace vtpu::isa
