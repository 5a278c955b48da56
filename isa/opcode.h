// Opcodes, executing units and operand kinds of the vtpu ISA, all expanded from isa_table.def.
// This header is the vocabulary every other room uses to talk about instructions.
#pragma once

#include <cstdint>
#include <string_view>

namespace vtpu::isa {

enum class Opcode : uint8_t {
#define VTPU_INSN(ident, mnemonic, unit, byte, element_bytes, operands, doc) ident,
#include "isa/isa_table.def"
#undef VTPU_INSN
};

inline constexpr int kOpcodeCount = 0
#define VTPU_INSN(ident, mnemonic, unit, byte, element_bytes, operands, doc) +1
#include "isa/isa_table.def"
#undef VTPU_INSN
    ;

// Bytes per lane element each opcode's vector load/store moves (the table's element_bytes
// column), as a constant array: the executor reads it on every vld/vst.
inline constexpr int kElementBytes[] = {
#define VTPU_INSN(ident, mnemonic, unit, byte, element_bytes, operands, doc) element_bytes,
#include "isa/isa_table.def"
#undef VTPU_INSN
};

// The unit class that executes an instruction. Mxu and Dma are families: the operand (x / dq)
// picks the instance.
enum class Unit : uint8_t { Scalar, Branch, Vpu, Transc, Xlane, VLoad, VStore, Mxu, Dma, Sync };
inline constexpr int kUnitCount = 10;
std::string_view unit_name(Unit unit);

enum class OperandKind : uint8_t {
  SRegDst, SRegSrc,       // s0..s31
  VRegDst, VRegSrc,       // v0..v31
  VGroupDst, VGroupSrc,   // mxu_dim/128 consecutive vregs
  VBlockDst, VBlockSrc,   // 16 consecutive vregs
  MaskDst, MaskSrc,       // m0..m7
  Mxu,                    // mxu0..
  DmaQueue,               // dq0..
  Semaphore,              // sem0..
  Imm16, Imm24, Imm32,    // signed
  UImm8,
  Label,                  // absolute instruction index
};

inline constexpr int kScalarRegs = 32;
inline constexpr int kVectorRegs = 32;
inline constexpr int kMaskRegs = 8;
inline constexpr int kVBlockRegs = 16;
inline constexpr int kMaxOperands = 8;

// Encoding width of each operand kind in bits; operands are packed below the 8-bit opcode.
int operand_bits(OperandKind kind);
bool is_register_kind(OperandKind kind);
bool is_destination(OperandKind kind);

// The MXU weight loads (mxu.lw, mxu.lw.i8, mxu.lwb, mxu.lw.t, mxu.lwb.t): one D x D load each.
constexpr bool is_weight_load(Opcode op) {
  return op == Opcode::Mxlw || op == Opcode::Mxlwi8 || op == Opcode::Mxlwb || op == Opcode::Mxlwt || op == Opcode::Mxlwbt;
}

}  // namespace vtpu::isa
