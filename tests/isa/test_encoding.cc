#include <doctest/doctest.h>

#include <random>

#include "isa/instruction.h"
#include "isa/instruction_info.h"
#include "isa/verifier.h"

using namespace vtpu::isa;

TEST_SUITE("isa") {
  TEST_CASE("no two encodings overlap") {
    const auto table = all_instructions();
    for (size_t i = 0; i < table.size(); ++i) {
      for (size_t j = i + 1; j < table.size(); ++j) {
        const auto& a = table[i];
        const auto& b = table[j];
        // Two patterns can match the same word unless they disagree on a bit both fix.
        INFO(a.mnemonic, " vs ", b.mnemonic);
        CHECK((a.mask & b.mask & (a.match ^ b.match)) != 0);
      }
    }
  }

  TEST_CASE("element widths come from the table's column: narrower only for bf16, f16, int8 and uint8 loads and stores") {
    for (const auto& insn : all_instructions()) {
      INFO(insn.mnemonic);
      const int bytes = vector_element_bytes(insn.opcode);
      const bool half_form = insn.mnemonic.ends_with(".bf16") || insn.mnemonic.ends_with(".f16");
      const bool byte_form = insn.mnemonic.ends_with(".i8") || insn.mnemonic.ends_with(".u8");
      const bool narrow_form = half_form || byte_form;
      const bool memory = insn.unit == Unit::VLoad || insn.unit == Unit::VStore;
      if (memory && half_form) {
        CHECK(bytes == 2);
      } else if (memory && byte_form) {
        CHECK(bytes == 1);
      } else {
        CHECK(bytes == 4);
      }
      if (bytes != 4) CHECK(narrow_form);
    }
  }

  TEST_CASE("operand fields fit below the opcode") {
    for (const auto& meta : all_instructions()) CHECK(meta.operand_bits_used <= kOperandFieldBits);
  }

  TEST_CASE("mnemonics are unique and round-trip through the lookup") {
    for (const auto& meta : all_instructions()) {
      CHECK(opcode_from_mnemonic(meta.mnemonic) == meta.opcode);
      CHECK(opcode_from_byte(meta.opcode_byte) == meta.opcode);
    }
  }

  TEST_CASE("encode/decode round-trips random operands of every opcode") {
    std::mt19937 rng(7);
    for (const auto& meta : all_instructions()) {
      for (int trial = 0; trial < 50; ++trial) {
        Instruction ins;
        ins.opcode = meta.opcode;
        for (int i = 0; i < meta.operand_count; ++i) {
          const int bits = operand_bits(meta.operands[i]);
          const bool is_signed = meta.operands[i] == OperandKind::Imm16 || meta.operands[i] == OperandKind::Imm24 ||
                                 meta.operands[i] == OperandKind::Imm32;
          const int64_t span = int64_t{1} << bits;
          int64_t v = static_cast<int64_t>(rng() % static_cast<uint64_t>(span));
          if (is_signed) v -= span / 2;
          ins.operands[i] = static_cast<int32_t>(v);
        }
        const uint64_t word = encode(ins);
        CHECK((word & meta.mask) == meta.match);
        CHECK(decode(word) == ins);
      }
    }
  }

  TEST_CASE("out-of-range operands and unknown opcodes are rejected") {
    Instruction ins{Opcode::Sshli, {1, 2, 300}};
    CHECK_THROWS_AS(encode(ins), std::out_of_range);
    CHECK_THROWS_WITH_AS(decode(uint64_t{0xff} << 56), doctest::Contains("unknown opcode byte 0xff"), DecodeError);
    // halt has no operands: any bit below the opcode is stray.
    CHECK_THROWS_AS(decode((uint64_t{info(Opcode::Halt).opcode_byte} << 56) | 1), DecodeError);
  }
}
