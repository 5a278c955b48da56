// The assembler's lexer: a cursor over one line that hands out identifiers, number tokens and
// punctuation, reports 1-based columns, and raises AsmError at the line and column of a problem.
#pragma once

#include <fmt/format.h>

#include <cctype>
#include <string>
#include <string_view>

#include "isa/asm_error.h"

namespace vtpu::isa::asm_detail {

inline bool is_ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == '.'; }
inline bool is_ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.'; }

inline bool is_float_literal(std::string_view tok) {
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

}  // namespace vtpu::isa::asm_detail
