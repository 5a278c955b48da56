#include <doctest/doctest.h>

#include <fstream>
#include <random>
#include <sstream>

#include "isa/assembler.h"
#include "isa/disassembler.h"
#include "isa/program.h"

using namespace vtpu::isa;

namespace {

std::string read_example(const std::string& name) {
  std::ifstream in(std::string(VTPU_SOURCE_DIR) + "/examples/" + name);
  REQUIRE(in.good());
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void check_error(const std::string& source, int line, int column, const std::string& fragment) {
  try {
    assemble(source);
    FAIL("expected an AsmError for: " << source);
  } catch (const AsmError& e) {
    CHECK(e.line() == line);
    CHECK(e.column() == column);
    CHECK_MESSAGE(e.message().find(fragment) != std::string::npos, std::string(e.what()));
  }
}

}  // namespace

TEST_SUITE("isa") {
  TEST_CASE("asm -> dis -> asm gives the same program for every example") {
    for (const char* name : {"vector_add.s", "matmul_bf16.s"}) {
      const Program first = assemble(read_example(name));
      const std::string text = disassemble(first);
      const Program second = assemble(text);
      CHECK(first == second);
      CHECK(deserialize(serialize(first)) == first);
    }
  }

  TEST_CASE("directives, expressions, float literals, .rept and data") {
    const Program p = assemble(R"(
.name demo
.arg x buffer
.arg n scalar
.set W, 3 * (4 + 1)
.default W, 99          ; keeps 15
  sarg s1, n
  sli s2, W % 4 - 2 / 2
  sli s3, -1.5f
.rept 3, I
  saddi s[4 + I], s1, I * 10
.endr
.data 64
.f32 1.0, -2.5
.bf16 1.0
.i8 -1, 255
)");
    CHECK(p.name == "demo");
    REQUIRE(p.arguments.size() == 2);
    CHECK(p.arguments[1].kind == ArgumentKind::Scalar);
    REQUIRE(p.code.size() == 6);
    CHECK(p.at(0).operands[1] == 1);
    CHECK(p.at(1).operands[1] == 2);
    CHECK(p.at(2).operands[1] == static_cast<int32_t>(0xbfc00000u));
    CHECK(p.at(5).operands[0] == 6);
    CHECK(p.at(5).operands[2] == 20);
    REQUIRE(p.data.size() == 1);
    CHECK(p.data[0].vmem_address == 64);
    CHECK(p.data[0].bytes.size() == 12);
    CHECK(p.data[0].bytes[8] == 0x80);  // bf16(1.0) = 0x3f80, little-endian
    CHECK(p.data[0].bytes[9] == 0x3f);
    CHECK(p.data[0].bytes[10] == 0xff);
  }

  TEST_CASE("predefined symbols override .default") {
    const Program p = assemble(".default N, 4\n sli s1, N\n", "p", {{"N", 9}});
    CHECK(p.at(0).operands[1] == 9);
  }

  TEST_CASE("errors name line, column and what was expected") {
    check_error("  sli s1, 1\n  vadd v1, v2\n", 2, 14, "expected ',' before operand 3 of vadd");
    check_error("  frob s1\n", 1, 3, "unknown mnemonic 'frob'");
    check_error("  sadd s1, s2, v3\n", 1, 16, "expected a scalar register");
    check_error("  sli s40, 1\n", 1, 7, "expected a scalar register (s0..s31)");
    check_error("  jmp nowhere\n", 1, 7, "undefined label 'nowhere'");
    check_error("a:\na:\n", 2, 1, "defined twice");
    check_error("  sshli s1, s2, 300\n", 1, 17, "does not fit");
    check_error("  sli s1, 1 / 0\n", 1, 13, "division by zero");
    check_error("  sli s1, 0x\n", 1, 11, "malformed number");
    check_error(".rept 2\n nop\n", 1, 1, "without matching '.endr'");
    check_error("  sli s1, 1 2\n", 1, 13, "expected end of line");
    check_error(".arg x tensor\n", 1, 8, "expected 'buffer' or 'scalar'");
    check_error("  sarg s1, y\n", 1, 12, "unknown argument 'y'");
    check_error("  sli s1, (1 + 2\n", 1, 17, "expected ')'");
  }

  TEST_CASE("the assembler never crashes: random bytes and mutated programs give programs or AsmErrors") {
    std::mt19937 rng(1234);
    const std::string seed = read_example("vector_add.s") + read_example("matmul_bf16.s");
    const std::string alphabet = "sv m0123456789,.:;#-+*/%()[]xabcdefhilnprtuwqL\n\t .rept .endr .set .data .f32";
    int accepted = 0, rejected = 0;
    for (int trial = 0; trial < 3000; ++trial) {
      std::string text;
      if (trial % 3 == 0) {
        const size_t n = rng() % 200;
        for (size_t i = 0; i < n; ++i) text.push_back(static_cast<char>(rng() % 256));
      } else {
        text = seed;
        const int edits = 1 + static_cast<int>(rng() % 8);
        for (int e = 0; e < edits; ++e) {
          const size_t pos = rng() % text.size();
          switch (rng() % 3) {
            case 0: text[pos] = alphabet[rng() % alphabet.size()]; break;
            case 1: text.erase(pos, 1 + rng() % 20); break;
            default: text.insert(pos, 1, alphabet[rng() % alphabet.size()]); break;
          }
          if (text.empty()) text = "x";
        }
      }
      try {
        const Program p = assemble(text);
        ++accepted;
        CHECK(assemble(disassemble(p)) == p);
      } catch (const AsmError&) {
        ++rejected;
      }
    }
    CHECK(accepted > 0);
    CHECK(rejected > 0);
  }

  TEST_CASE("the MXU width a program targets survives text and binary round trips; version 1 files read as any width") {
    const Program p = assemble(".name wide\n.mxu_dim 256\n  halt\n");
    CHECK(p.mxu_dim == 256);
    CHECK(assemble(disassemble(p)) == p);
    CHECK(deserialize(serialize(p)) == p);
    CHECK_THROWS_WITH_AS(assemble(".mxu_dim 100\n  halt\n"), doctest::Contains("positive multiple of 128"), AsmError);
    // a version 2 file is version 3 without the flags word after the width, version 1 without both
    const size_t width_at = 4 + 4 + 4 + 3;  // magic, version, name length, "old"
    for (const uint8_t version : {1, 2}) {
      auto bytes = serialize(assemble(".name old\n.mxu_dim 128\n.multicore\n  halt\n"));
      bytes.erase(bytes.begin() + width_at + (version == 2 ? 4 : 0), bytes.begin() + width_at + 8);
      bytes[4] = version;
      const Program old = deserialize(bytes);
      CHECK(old.name == "old");
      CHECK(old.mxu_dim == (version == 2 ? 128u : 0u));
      CHECK_FALSE(old.multicore);
      CHECK(old.code.size() == 1);
    }
  }

  TEST_CASE(".multicore survives text and binary round trips; unknown flags are refused") {
    const Program p = assemble(".name split\n.multicore\n  score s1\n  sncore s2\n  halt\n");
    CHECK(p.multicore);
    CHECK_FALSE(assemble("  halt\n").multicore);
    CHECK(assemble(disassemble(p)) == p);
    CHECK(deserialize(serialize(p)) == p);
    auto bytes = serialize(p);
    bytes[4 + 4 + 4 + 5 + 4] = 2;  // the flags word's low byte, after magic, version, name, width
    CHECK_THROWS_WITH_AS(deserialize(bytes), doctest::Contains("unknown program flags"), FormatError);
  }

  TEST_CASE("binary programs: corrupt or truncated files are FormatErrors") {
    const Program p = assemble(read_example("vector_add.s"));
    auto bytes = serialize(p);
    for (size_t cut = 0; cut < bytes.size(); cut += 7) {
      CHECK_THROWS_AS(deserialize(std::span(bytes).first(cut)), FormatError);
    }
    auto bad = bytes;
    bad[0] = 'X';
    CHECK_THROWS_WITH_AS(deserialize(bad), doctest::Contains("bad magic"), FormatError);
    std::mt19937 rng(5);
    for (int trial = 0; trial < 2000; ++trial) {
      auto mutated = bytes;
      mutated[rng() % mutated.size()] ^= static_cast<uint8_t>(1 + rng() % 255);
      try {
        (void)deserialize(mutated);
      } catch (const FormatError&) {
      }
    }
  }
}
