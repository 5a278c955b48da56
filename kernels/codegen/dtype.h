// Element types of tensors the kernels move and compute on, and how the chip holds each one.
// The chip computes in f32 and int32 vregs; bf16, f16, int8 and uint8 are storage formats widened on load
// (f16 as XLA holds it on TPUs: the VPU and MXU have no f16 arithmetic).
#pragma once

#include <cstdint>
#include <string_view>

namespace vtpu::kernels {

enum class DType : uint8_t { F32, BF16, F16, I8, I32, I64, Bool, U8 };

inline int dtype_bytes(DType t) {
  switch (t) {
    case DType::F32: case DType::I32: return 4;
    case DType::BF16: case DType::F16: return 2;
    case DType::I8: case DType::U8: case DType::Bool: return 1;
    case DType::I64: return 8;
  }
  return 0;
}

inline std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::BF16: return "bf16";
    case DType::F16: return "f16";
    case DType::I8: return "i8";
    case DType::I32: return "i32";
    case DType::I64: return "i64";
    case DType::Bool: return "bool";
    case DType::U8: return "u8";
  }
  return "?";
}

// Kernels load and store these directly. i64 has no vector load/store on the chip: the planner
// rejects it (the bridge narrows it or falls back), rather than reinterpreting bits.
inline bool dtype_on_chip(DType t) { return t != DType::I64; }
inline bool dtype_is_float(DType t) { return t == DType::F32 || t == DType::BF16 || t == DType::F16; }
// Held in HBM as their own bytes, so a value of one may be read as another (a bit view); the
// narrow integers and bool are widened on the chip, int64 split into words.
inline bool dtype_is_plain_bytes(DType t) {
  return t == DType::F32 || t == DType::I32 || t == DType::BF16 || t == DType::F16;
}
inline bool dtype_is_integer(DType t) { return !dtype_is_float(t); }  // bool counts: it promotes like one

}  // namespace vtpu::kernels
