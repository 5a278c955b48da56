// Directives (.name, .mxu_dim, .multicore, .arg, .set, .default, .data) and the values of constant data
// segments (.f32, .bf16, .i32, .i8, .byte) (asm_parser.h).
#include "isa/asm_parser.h"

#include <fmt/format.h>

namespace vtpu::isa::asm_detail {

void Assembler::flush_data(uint32_t new_origin) {
  if (!data_.bytes.empty()) program_.data.push_back(std::move(data_));
  data_ = DataSegment{new_origin, {}};
}

template <typename T>
void Assembler::append_data(T value) {
  uint8_t raw[sizeof(T)];
  std::memcpy(raw, &value, sizeof(T));
  data_.bytes.insert(data_.bytes.end(), raw, raw + sizeof(T));
}

void Assembler::directive(std::string_view word, LineCursor& cur, int column) {
  if (word == ".name") {
    std::string_view name = cur.identifier();
    if (name.empty()) cur.fail("expected a program name");
    program_.name = std::string(name);
  } else if (word == ".mxu_dim") {
    const int64_t dim = expression(cur);
    if (dim <= 0 || dim % 128 != 0 || dim > 1024) cur.fail_at(column, "an MXU width is a positive multiple of 128 (up to 1024)");
    program_.mxu_dim = static_cast<uint32_t>(dim);
  } else if (word == ".multicore") {
    program_.multicore = true;
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

void Assembler::data_values(std::string_view word, LineCursor& cur) {
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

}  // namespace vtpu::isa::asm_detail
