// IEEE binary16 <-> f32 conversions as the chip's f16 loads and stores do them: round-to-nearest-even,
// subnormals kept, overflow to inf, NaN stays NaN (quiet). f16 is a storage format on the chip (as
// XLA treats it on TPUs): values are widened to f32 on load and computed in f32.
#pragma once

#include <bit>
#include <cstdint>

namespace vtpu::sim {

inline uint16_t f32_to_f16_bits(float value) {
  constexpr uint32_t kF32Inf = 255u << 23, kF16Overflow = (127u + 16) << 23;  // 2^16: beyond f16's range
  constexpr uint32_t kLowestNormal = 113u << 23;                              // 2^-14, f16's smallest normal
  // Adding 0.5 (2^-1) puts a subnormal's 10 mantissa bits at the bottom of an f32 whose addition
  // already rounded to nearest even.
  constexpr uint32_t kSubnormalMagic = ((127u - 15) + (23 - 10) + 1) << 23;
  uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  bits &= 0x7fffffffu;
  uint32_t out;
  if (bits >= kF16Overflow) {
    out = bits > kF32Inf ? 0x7e00u : 0x7c00u;
  } else if (bits < kLowestNormal) {
    const float shifted = std::bit_cast<float>(bits) + std::bit_cast<float>(kSubnormalMagic);
    out = std::bit_cast<uint32_t>(shifted) - kSubnormalMagic;
  } else {
    const uint32_t odd = (bits >> 13) & 1u;
    bits += ((15u - 127u) << 23) + 0xfffu + odd;  // rebias the exponent; round half to even (may carry to inf)
    out = bits >> 13;
  }
  return static_cast<uint16_t>(out | sign);
}

inline float f16_bits_to_f32(uint16_t half) {
  constexpr uint32_t kExponent = 0x7c00u << 13;
  uint32_t bits = (uint32_t{half} & 0x7fffu) << 13;
  const uint32_t exponent = bits & kExponent;
  bits += (127u - 15u) << 23;
  if (exponent == kExponent) {
    bits += (128u - 16u) << 23;  // inf or NaN
  } else if (exponent == 0) {    // zero or subnormal: renormalise through an f32 subtraction
    bits += 1u << 23;
    bits = std::bit_cast<uint32_t>(std::bit_cast<float>(bits) - std::bit_cast<float>(113u << 23));
  }
  return std::bit_cast<float>(bits | (uint32_t{half} & 0x8000u) << 16);
}

inline float round_to_f16(float value) { return f16_bits_to_f32(f32_to_f16_bits(value)); }

}  // namespace vtpu::sim
