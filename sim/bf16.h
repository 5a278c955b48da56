// bf16 <-> f32 conversions as the chip does them: round-to-nearest-even, NaN stays NaN (quiet).
#pragma once

#include <bit>
#include <cstdint>

namespace vtpu::sim {

inline uint16_t f32_to_bf16_bits(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);  // quiet NaN
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

inline float bf16_bits_to_f32(uint16_t bits) { return std::bit_cast<float>(uint32_t{bits} << 16); }

inline float round_to_bf16(float value) { return bf16_bits_to_f32(f32_to_bf16_bits(value)); }

}  // namespace vtpu::sim
