// Single pass over lines with label fix-ups at the end. Operand parsing is driven by the
// OperandKind list of each opcode, so a new table row needs no assembler change.
#include "isa/assembler.h"

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

namespace vtpu::isa {

AsmError::AsmError(int line, int column, const std::string& message)
    : std::runtime_error(fmt::format("{}:{}: {}", line, column, message)),
      line_(line),
      column_(column),
      message_(message) {}

namespace {

bool is_ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == '.'; }
bool is_ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.'; }

bool is_float_literal(std::string_view tok) {
  return !tok.empty() && (tok.back() == 'f' || tok.back() == 'F') &&
         !(tok.size() > 2 && tok[0] == '0' && (tok[1] == 'x' || tok[1] == 'X'));
}

// A cursor over one line; positions are 0-based internally and reported 1-based.
class LineCursor {
 public:
  LineCursor(std::string_view text, int line) : text_(text), line_(line) {}

  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\r')) ++pos_;
  }
  bool at_end() {
    skip_space();
    return pos_ >= text_.size();
  }
  char peek() {
    skip_space();
    return pos_ < text_.size() ? text_[pos_] : '\0';
  }
  bool accept(char c) {
    if (peek() == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  std::string_view identifier() {
    skip_space();
    const size_t start = pos_;
    if (pos_ < text_.size() && is_ident_start(text_[pos_])) {
      ++pos_;
      while (pos_ < text_.size() && is_ident_char(text_[pos_])) ++pos_;
    }
    return text_.substr(start, pos_ - start);
  }
  // A run of characters that may form a number, e.g. "0x1f", "1.5e-3f", "42".
  std::string_view number_token() {
    skip_space();
    const size_t start = pos_;
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      const bool exponent_sign =
          (c == '-' || c == '+') && pos_ > start && (text_[pos_ - 1] == 'e' || text_[pos_ - 1] == 'E') &&
          !(pos_ >= start + 2 && text_[start] == '0' && (text_[start + 1] == 'x' || text_[start + 1] == 'X'));
      if (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || exponent_sign) {
        ++pos_;
      } else {
        break;
      }
    }
    return text_.substr(start, pos_ - start);
  }
  int column() {
    skip_space();
    return static_cast<int>(pos_) + 1;
  }
  [[noreturn]] void fail(const std::string& message) { throw AsmError(line_, column(), message); }
  [[noreturn]] void fail_at(int column, const std::string& message) { throw AsmError(line_, column, message); }
  int line() const { return line_; }

 private:
  std::string_view text_;
  int line_;
  size_t pos_ = 0;
};

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
  Assembler(std::string_view name, const Defines& defines) : symbols_(defines.begin(), defines.end()) {
    program_.name = std::string(name);
  }

  static std::string_view strip_comment(std::string_view text) {
    // ';', '#' and '//' start a comment.
    for (size_t i = 0; i < text.size(); ++i) {
      if (text[i] == ';' || text[i] == '#' || (text[i] == '/' && i + 1 < text.size() && text[i + 1] == '/')) {
        return text.substr(0, i);
      }
    }
    return text;
  }

  void line(std::string_view text, int line_number) {
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
  std::pair<int64_t, std::string> rept_header(std::string_view text, int line_number) {
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

  // Binds a .rept counter; unlike .set it may be rebound on every iteration.
  void bind_counter(const std::string& name, int64_t value) { symbols_[name] = value; }
  void unbind_counter(const std::string& name) { symbols_.erase(name); }
  bool has_symbol(const std::string& name) const { return symbols_.count(name) != 0; }

  Program finish() {
    for (const auto& fix : fixups_) {
      auto it = labels_.find(fix.label);
      if (it == labels_.end()) throw AsmError(fix.line, fix.column, fmt::format("undefined label '{}'", fix.label));
      pending_[fix.instruction_index].instruction.operands[fix.operand_index] = static_cast<int32_t>(it->second);
    }
    for (const auto& p : pending_) program_.code.push_back(encode(p.instruction));
    if (!data_.bytes.empty()) program_.data.push_back(std::move(data_));
    return std::move(program_);
  }

 private:
  void define_label(std::string_view name, LineCursor& cur, int column) {
    if (name.front() == '.') cur.fail_at(column, fmt::format("label '{}' may not start with '.'", name));
    if (opcode_from_mnemonic(name)) cur.fail_at(column, fmt::format("label '{}' is a mnemonic", name));
    if (!labels_.emplace(std::string(name), pending_.size()).second) {
      cur.fail_at(column, fmt::format("label '{}' defined twice", name));
    }
  }

  void expect_end(LineCursor& cur) {
    if (!cur.at_end()) cur.fail(fmt::format("expected end of line, found '{}'", cur.peek()));
  }

  // expr := term (('+'|'-') term)* ; term := unary (('*'|'/') unary)* ; unary := '-' unary | primary
  // Evaluated in 64 bits; every intermediate must stay within +-2^40 so no wrap can hide a typo.
  int64_t expression(LineCursor& cur, int depth = 0) {
    if (depth > 32) cur.fail("expression nested too deeply");
    const int column = cur.column();
    int64_t value = term(cur, depth);
    for (;;) {
      if (cur.accept('+')) {
        value = in_range(cur, column, value + term(cur, depth));
      } else if (cur.accept('-')) {
        value = in_range(cur, column, value - term(cur, depth));
      } else {
        return value;
      }
    }
  }
  int64_t term(LineCursor& cur, int depth) {
    const int column = cur.column();
    int64_t value = unary(cur, depth);
    for (;;) {
      if (cur.accept('*')) {
        int64_t product = 0;
        if (__builtin_mul_overflow(value, unary(cur, depth), &product)) cur.fail_at(column, "expression overflows");
        value = in_range(cur, column, product);
      } else if (cur.peek() == '/' || cur.peek() == '%') {
        const int slash_column = cur.column();
        const bool remainder = cur.accept('%');
        if (!remainder) cur.accept('/');
        const int64_t rhs = unary(cur, depth);
        if (rhs == 0) cur.fail_at(slash_column, "division by zero in expression");
        value = remainder ? value % rhs : value / rhs;
      } else {
        return value;
      }
    }
  }
  static int64_t in_range(LineCursor& cur, int column, int64_t value) {
    constexpr int64_t kLimit = int64_t{1} << 40;
    if (value > kLimit || value < -kLimit) cur.fail_at(column, "expression value out of range (|v| <= 2^40)");
    return value;
  }
  int64_t unary(LineCursor& cur, int depth) {
    if (depth > 32) cur.fail("expression nested too deeply");
    if (cur.accept('-')) {
      // "-1.5f" negates the float, not its bit pattern.
      LineCursor probe = cur;
      if (std::isdigit(static_cast<unsigned char>(probe.peek())) && is_float_literal(probe.number_token())) {
        const int64_t bits = number(cur);
        return std::bit_cast<int32_t>(-std::bit_cast<float>(static_cast<int32_t>(bits)));
      }
      return -unary(cur, depth + 1);
    }
    if (cur.accept('(')) {
      const int64_t v = expression(cur, depth + 1);
      if (!cur.accept(')')) cur.fail("expected ')'");
      return v;
    }
    const char c = cur.peek();
    const int column = cur.column();
    if (std::isdigit(static_cast<unsigned char>(c))) return number(cur);
    std::string_view name = cur.identifier();
    if (name.empty()) cur.fail("expected a number, a symbol or '('");
    auto it = symbols_.find(std::string(name));
    if (it == symbols_.end()) cur.fail_at(column, fmt::format("unknown symbol '{}'", name));
    return it->second;
  }
  int64_t number(LineCursor& cur) {
    const int column = cur.column();
    std::string_view tok = cur.number_token();
    if (is_float_literal(tok)) {
      // A float literal: its f32 bit pattern as an integer.
      const std::string body(tok.substr(0, tok.size() - 1));
      char* end = nullptr;
      const float f = std::strtof(body.c_str(), &end);
      if (body.empty() || end != body.c_str() + body.size()) {
        cur.fail_at(column, fmt::format("malformed float literal '{}'", tok));
      }
      return std::bit_cast<int32_t>(f);
    }
    int base = 10;
    std::string_view digits = tok;
    if (tok.size() > 2 && tok[0] == '0' && (tok[1] == 'x' || tok[1] == 'X')) {
      base = 16;
      digits = tok.substr(2);
    }
    uint64_t value = 0;
    auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value, base);
    if (digits.empty() || ec != std::errc() || ptr != digits.data() + digits.size()) {
      cur.fail_at(column, fmt::format("malformed number '{}'", tok));
    }
    if (value > (uint64_t{1} << 40)) cur.fail_at(column, fmt::format("number '{}' out of range", tok));
    return static_cast<int64_t>(value);
  }

  int register_number(LineCursor& cur, std::string_view prefix, int count, const char* what) {
    const int column = cur.column();
    std::string_view name = cur.identifier();
    if (name == prefix && cur.accept('[')) {
      // Computed register number, e.g. v[1 + i % 8] inside a .rept block.
      const int64_t value = expression(cur);
      if (!cur.accept(']')) cur.fail("expected ']'");
      if (value < 0 || value >= count) {
        cur.fail_at(column, fmt::format("{} index {} out of range ({}0..{}{})", what, value, prefix, prefix, count - 1));
      }
      return static_cast<int>(value);
    }
    if (name.size() <= prefix.size() || name.substr(0, prefix.size()) != prefix) {
      cur.fail_at(column, fmt::format("expected {} ({}0..{}{}), found '{}'", what, prefix, prefix, count - 1,
                                      name.empty() ? std::string(1, cur.peek()) : std::string(name)));
    }
    std::string_view digits = name.substr(prefix.size());
    int value = 0;
    auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (ec != std::errc() || ptr != digits.data() + digits.size() || value < 0 || value >= count) {
      cur.fail_at(column, fmt::format("expected {} ({}0..{}{}), found '{}'", what, prefix, prefix, count - 1, name));
    }
    return value;
  }

  int32_t operand(LineCursor& cur, Opcode op, OperandKind kind, int index) {
    switch (kind) {
      case OperandKind::SRegDst: case OperandKind::SRegSrc:
        return register_number(cur, "s", kScalarRegs, "a scalar register");
      case OperandKind::VRegDst: case OperandKind::VRegSrc: case OperandKind::VGroupDst:
      case OperandKind::VGroupSrc: case OperandKind::VBlockDst: case OperandKind::VBlockSrc:
        return register_number(cur, "v", kVectorRegs, "a vector register");
      case OperandKind::MaskDst: case OperandKind::MaskSrc:
        return register_number(cur, "m", kMaskRegs, "a mask register");
      case OperandKind::Mxu: return register_number(cur, "mxu", 1 << operand_bits(kind), "an MXU");
      case OperandKind::DmaQueue: return register_number(cur, "dq", 1 << operand_bits(kind), "a DMA queue");
      case OperandKind::Semaphore: return register_number(cur, "sem", 1 << operand_bits(kind), "a semaphore");
      case OperandKind::Label: {
        const int column = cur.column();
        if (std::isdigit(static_cast<unsigned char>(cur.peek()))) {
          const int64_t target = number(cur);
          if (!operand_fits(kind, target)) cur.fail_at(column, "branch target out of range");
          return static_cast<int32_t>(target);
        }
        std::string_view name = cur.identifier();
        if (name.empty()) cur.fail_at(column, "expected a label");
        fixups_.push_back({pending_.size(), index, std::string(name), cur.line(), column});
        return 0;
      }
      case OperandKind::UImm8:
        if (op == Opcode::Sarg && is_ident_start(cur.peek())) {
          const int column = cur.column();
          std::string_view name = cur.identifier();
          for (size_t i = 0; i < program_.arguments.size(); ++i) {
            if (program_.arguments[i].name == name) return static_cast<int32_t>(i);
          }
          auto sym = symbols_.find(std::string(name));
          if (sym != symbols_.end() && operand_fits(kind, sym->second)) return static_cast<int32_t>(sym->second);
          cur.fail_at(column, fmt::format("unknown argument '{}' (declare it with .arg)", name));
        }
        [[fallthrough]];
      case OperandKind::Imm16: case OperandKind::Imm24: case OperandKind::Imm32: {
        const int column = cur.column();
        const int64_t value = expression(cur);
        // Imm32 also takes unsigned 32-bit patterns such as 0xffffffff.
        const int64_t wrapped = (kind == OperandKind::Imm32 && value > INT32_MAX && value <= UINT32_MAX)
                                    ? value - (int64_t{1} << 32)
                                    : value;
        if (!operand_fits(kind, wrapped)) {
          cur.fail_at(column, fmt::format("immediate {} does not fit {} ({} bits)", value,
                                          kind == OperandKind::UImm8 ? "an unsigned field" : "a signed field",
                                          operand_bits(kind)));
        }
        return static_cast<int32_t>(wrapped);
      }
    }
    cur.fail("internal: unhandled operand kind");
  }

  void instruction(std::string_view mnemonic, LineCursor& cur, int column) {
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

  void flush_data(uint32_t new_origin) {
    if (!data_.bytes.empty()) program_.data.push_back(std::move(data_));
    data_ = DataSegment{new_origin, {}};
  }

  template <typename T>
  void append_data(T value) {
    uint8_t raw[sizeof(T)];
    std::memcpy(raw, &value, sizeof(T));
    data_.bytes.insert(data_.bytes.end(), raw, raw + sizeof(T));
  }

  void directive(std::string_view word, LineCursor& cur, int column) {
    if (word == ".name") {
      std::string_view name = cur.identifier();
      if (name.empty()) cur.fail("expected a program name");
      program_.name = std::string(name);
    } else if (word == ".mxu_dim") {
      const int64_t dim = expression(cur);
      if (dim <= 0 || dim % 128 != 0 || dim > 1024) cur.fail_at(column, "an MXU width is a positive multiple of 128 (up to 1024)");
      program_.mxu_dim = static_cast<uint32_t>(dim);
    } else if (word == ".arg") {
      const int name_column = cur.column();
      std::string_view name = cur.identifier();
      if (name.empty()) cur.fail("expected an argument name");
      for (const auto& a : program_.arguments) {
        if (a.name == name) cur.fail_at(name_column, fmt::format("argument '{}' declared twice", name));
      }
      const int kind_column = cur.column();
      std::string_view kind = cur.identifier();
      ArgumentKind k;
      if (kind == "buffer") {
        k = ArgumentKind::Buffer;
      } else if (kind == "scalar") {
        k = ArgumentKind::Scalar;
      } else {
        cur.fail_at(kind_column, "expected 'buffer' or 'scalar' after the argument name");
      }
      if (program_.arguments.size() >= 256) cur.fail_at(name_column, "at most 256 arguments");
      program_.arguments.push_back({std::string(name), k});
    } else if (word == ".set") {
      const int name_column = cur.column();
      std::string_view name = cur.identifier();
      if (name.empty()) cur.fail("expected a symbol name");
      if (!cur.accept(',') && cur.at_end()) cur.fail("expected a value");
      const int64_t value = expression(cur);
      if (!symbols_.emplace(std::string(name), value).second) {
        cur.fail_at(name_column, fmt::format("symbol '{}' defined twice", name));
      }
    } else if (word == ".default") {
      std::string_view name = cur.identifier();
      if (name.empty()) cur.fail("expected a symbol name");
      if (!cur.accept(',') && cur.at_end()) cur.fail("expected a value");
      const int64_t value = expression(cur);
      symbols_.emplace(std::string(name), value);  // keeps a predefined value
    } else if (word == ".data") {
      const int64_t origin = expression(cur);
      if (origin < 0 || origin > UINT32_MAX) cur.fail_at(column, "data origin out of range");
      flush_data(static_cast<uint32_t>(origin));
    } else if (word == ".f32" || word == ".bf16" || word == ".i32" || word == ".i8" || word == ".byte") {
      data_values(word, cur);
    } else {
      cur.fail_at(column, fmt::format("unknown directive '{}'", word));
    }
    expect_end(cur);
  }

  void data_values(std::string_view word, LineCursor& cur) {
    bool first = true;
    while (!cur.at_end()) {
      if (!first && !cur.accept(',')) cur.fail("expected ',' between values");
      first = false;
      const int column = cur.column();
      if (word == ".f32" || word == ".bf16") {
        bool negative = cur.accept('-');
        std::string tok(cur.number_token());
        if (!tok.empty() && (tok.back() == 'f' || tok.back() == 'F')) tok.pop_back();
        char* end = nullptr;
        float f = std::strtof(tok.c_str(), &end);
        if (tok.empty() || end != tok.c_str() + tok.size()) cur.fail_at(column, "expected a float value");
        if (negative) f = -f;
        if (word == ".f32") {
          append_data(f);
        } else {
          // Round to nearest even, the chip's conversion.
          uint32_t bits = std::bit_cast<uint32_t>(f);
          const uint16_t half = std::isnan(f) ? static_cast<uint16_t>((bits >> 16) | 0x40)
                                              : static_cast<uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
          append_data(half);
        }
      } else {
        const int64_t v = expression(cur);
        if (word == ".i32") {
          if (v < INT32_MIN || v > UINT32_MAX) cur.fail_at(column, "value does not fit 32 bits");
          append_data(static_cast<uint32_t>(v));
        } else {
          if (v < -128 || v > 255) cur.fail_at(column, "value does not fit 8 bits");
          append_data(static_cast<uint8_t>(v));
        }
      }
      if (data_.bytes.size() > (size_t{1} << 30)) cur.fail_at(column, "data segment larger than 1 GiB");
    }
    if (first) cur.fail(fmt::format("{} needs at least one value", word));
  }

  Program program_;
  std::vector<PendingInstruction> pending_;
  std::vector<LabelFixup> fixups_;
  std::map<std::string, size_t, std::less<>> labels_;
  std::map<std::string, int64_t, std::less<>> symbols_;
  DataSegment data_;
};

}  // namespace

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
