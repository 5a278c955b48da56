// Constant expressions in operands and directives: + - * / %, unary minus, parentheses, numbers
// (decimal, hex, float literals as their bit patterns) and symbols, all within +-2^40 (asm_parser.h).
#include "isa/asm_parser.h"

#include <fmt/format.h>

namespace vtpu::isa::asm_detail {

// expr := term (('+'|'-') term)* ; term := unary (('*'|'/') unary)* ; unary := '-' unary | primary
// Evaluated in 64 bits; every intermediate must stay within +-2^40 so no wrap can hide a typo.
int64_t Assembler::expression(LineCursor& cur, int depth) {
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

int64_t Assembler::term(LineCursor& cur, int depth) {
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

int64_t Assembler::in_range(LineCursor& cur, int column, int64_t value) {
  constexpr int64_t kLimit = int64_t{1} << 40;
  if (value > kLimit || value < -kLimit) cur.fail_at(column, "expression value out of range (|v| <= 2^40)");
  return value;
}

int64_t Assembler::unary(LineCursor& cur, int depth) {
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

int64_t Assembler::number(LineCursor& cur) {
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

}  // namespace vtpu::isa::asm_detail
